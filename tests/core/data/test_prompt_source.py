"""A run's prompts come from a plugin (``hfsdk_load_prompts``): the docs' example runs as
written, and a run with no plugin to load its prompts stops in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import hfsdk
from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.data.prompt_source import NO_PROMPT_PLUGIN
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk.core.trainer.preflight import prepare_run

from ...conftest import make_distribution

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"
SMALL = ["data.batch_size=3", "trainer.executor=local"]


def _doc_example() -> str:
    section = DOC.read_text().split("## hfsdk_load_prompts\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)[-1]


def _grpo() -> hfsdk.AlgorithmSpec:
    return hfsdk.get_registry("algorithms")["grpo"].impl


def test_the_documented_plugin_loads_a_runs_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "hfsdk-tsv", "tsv_prompts", "tsv_prompts", _doc_example())
    monkeypatch.syspath_prepend(str(site))
    reset_plugin_manager()
    train = tmp_path / "train.tsv"
    train.write_text("2 + 3 =\t5\n1 + 1 =\t2\n4 + 4 =\t8\n3 + 1 =\t4\n")
    val = tmp_path / "val.tsv"
    val.write_text("1 + 2 =\t3\n")
    files = [f"data.train_files=[{train}]", f"data.val_files=[{val}]", "trainer.val_every=1"]
    files.append("reward.functions=[{name: exact_match}]")  # checked against row_columns
    prepared = prepare_run(load_run_config("grpo", None, [*SMALL, *files]), _grpo())

    stream = prepared.loader
    first = stream.next_batch()
    assert list(first["raw_prompt"]) == ["2 + 3 =", "1 + 1 =", "4 + 4 ="]
    assert list(first["answer"]) == ["5", "2", "8"]
    assert first["attention_mask"][:, -1].tolist() == [1, 1, 1]  # left-padded
    position = stream.state_dict()
    second = stream.next_batch(2)
    assert list(second["raw_prompt"]) == ["3 + 1 =", "2 + 3 ="]  # cycles
    stream.load_state_dict(position)
    assert torch.equal(stream.next_batch(2)["input_ids"], second["input_ids"])
    assert list(prepared.val_loader.whole()["raw_prompt"]) == ["1 + 2 ="]
    # Other files are still the default plugin's: it answers after this one declined.
    default = prepare_run(load_run_config("grpo", None, SMALL), _grpo())
    assert "prompt" in default.loader.next_batch()


def test_no_prompt_plugin_is_one_line_naming_the_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "prompt_datasets")
    reset_plugin_manager()
    with pytest.raises(hfsdk.HfsdkError) as info:
        prepare_run(load_run_config("grpo", None, SMALL), _grpo())
    # The lookup's note names the plugin HFSDK_DISABLE_PLUGINS blocks.
    assert str(info.value).startswith(NO_PROMPT_PLUGIN) and "prompt_datasets" in str(info.value)
    assert "install hfsdk-plugin-datasets" in NO_PROMPT_PLUGIN
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--algo", "grpo", "--run-dir", str(run_dir), *SMALL])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    lines = [line for line in err.splitlines() if "hfsdk-plugin-datasets" in line]
    assert len(lines) == 1 and "Traceback" not in err
    assert not run_dir.exists()  # refused before the run directory is made


def test_a_broken_prompt_plugin_is_named_with_why_it_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    broken = "import hfsdk\nfrom no_such_module import loader\n"
    make_distribution(site, "hfsdk-broken-prompts", "broken_prompts", "broken_prompts", broken)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "prompt_datasets")
    reset_plugin_manager()
    with pytest.raises(hfsdk.HfsdkError) as info:
        prepare_run(load_run_config("grpo", None, SMALL), _grpo())
    message = str(info.value)
    assert message.startswith(NO_PROMPT_PLUGIN) and "\n" not in message
    assert "broken_prompts [hfsdk-broken-prompts]" in message and "no_such_module" in message
