"""The environment example of docs/agents.md, run as written, and the CLI's refusals."""

from __future__ import annotations

import json
import re
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from hfsdk import Batch, generate_rollout
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager

from ..fakes import rollout_for, word_tokenizer

DOC = Path(__file__).resolve().parents[4] / "docs" / "agents.md"


def _example() -> str:
    section = re.search(r"^## Environments\n(.*?)(?=^## |\Z)", DOC.read_text(), re.M | re.S)
    assert section is not None
    return re.findall(r"```python\n(.*?)```", section.group(1), re.S)[0]


@pytest.fixture
def doc_plugin() -> Iterator[types.ModuleType]:
    module = types.ModuleType("doc_environment_plugin")
    exec(compile(_example(), str(DOC), "exec"), module.__dict__)
    reset_plugin_manager()
    get_plugin_manager().pm.register(module, name="doc_environment")
    yield module
    reset_plugin_manager()


WORDS = """guess a number from 1 to 20 right higher lower 7}} 9}} <tool_call> </tool_call>
{"name": "guess", "arguments": {"number": <tool_response> </tool_response>"""
TOK = word_tokenizer(WORDS.split())


def test_the_docs_environment_runs_as_written(doc_plugin: types.ModuleType) -> None:
    call = TOK.encode(
        '<tool_call> {"name": "guess", "arguments": {"number": 7}} </tool_call>',
        add_special_tokens=False,
    )
    rollout = rollout_for(
        TOK, lambda context: call, environment="guess_the_number", renderer="plain", max_turns=3
    )
    ids = torch.tensor([TOK.encode("guess"), TOK.encode("guess")])
    prompts = Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        non_tensors={"raw_prompt": ["guess"] * 2, "answer": ["7", "9"]},
        meta={"n": 1},
    )
    out = generate_rollout(rollout, prompts)
    solved, missed = (json.loads(json.dumps(t)) for t in out["agent_trajectory"])
    assert (solved["finish"], solved["extra"]["environment_reward"]) == ("done", 1.0)
    assert (missed["finish"], missed["extra"]["environment_reward"]) == ("max_turns", 0.0)
    tool_texts = [s["text"] for s in missed["segments"] if s["role"] == "tool"]
    assert tool_texts == ["<tool_response> higher </tool_response>"] * 3
    assert missed["segments"][0]["text"] == "guess a number from 1 to 20"


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *overrides: str) -> str:
    from hfsdk.core.cli.main import main

    args = ["run", "--algo", "grpo", "--task", "frozen_lake", "--run-dir", str(tmp_path / "r")]
    with pytest.raises(SystemExit) as info:
        main([*args, "--quiet", "trainer.total_steps=1", *overrides])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_an_unknown_environment_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    err = _run(
        tmp_path,
        capsys,
        "rollout.multi_turn.environment_column=null",
        "rollout.multi_turn.environment=frozen_lak",
    )
    assert "unknown environment 'frozen_lak'; available: " in err
    assert "did you mean 'frozen_lake'?" in err


def test_a_row_without_its_environment_is_refused_before_the_run(tmp_path: Path, capsys) -> None:
    data = tmp_path / "rows.jsonl"
    rows = [{"prompt": "frozen lake :", "environment": "frozen_lake"}, {"prompt": "frozen lake :"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    err = _run(tmp_path, capsys, f"data.train_files=[{data}]", "data.val_files=[]")
    assert "train data: row 1 has no environment name in column 'environment' (got None)" in err
    assert not (tmp_path / "r" / "metrics.jsonl").exists()


def test_the_docs_config_selects_the_environment_loop(doc_plugin: types.ModuleType) -> None:
    import yaml

    from hfsdk.core.config import resolve_run_config
    from hfsdk_agents.checks import prompt_tool_schemas
    from hfsdk_agents.config import multi_turn_config

    section = re.search(r"^## Environments\n(.*?)(?=^## |\Z)", DOC.read_text(), re.M | re.S)
    assert section is not None
    overrides = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", section.group(1), re.S)[0])
    config = resolve_run_config("grpo", overrides)
    multi_turn = multi_turn_config(config.rollout)
    assert (multi_turn.loop_name, multi_turn.environment) == (
        "environment_loop",
        "guess_the_number",
    )
    assert [s["function"]["name"] for s in prompt_tool_schemas(config)] == ["guess"]
    assert [f.name for f in config.reward.functions] == ["environment"]
