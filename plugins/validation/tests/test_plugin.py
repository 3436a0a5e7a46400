"""The validation plugin through its hook: it answers ``hfsdk_validate``, the doc's example
works as written, and a run that validates without the plugin stops in one line naming it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

import hfsdk
from hfsdk import Batch, HfsdkError, ValidationResult, get_plugin_manager
from hfsdk.core.config import load_run_config
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk.core.trainer.preflight import check_features
from hfsdk.core.trainer.trainer_config import TrainerConfig

DISTRIBUTION = "hfsdk-plugin-validation"
DOC = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"


class _Greedy:
    """Generates one response per prompt, scored 1.0."""

    def generate(self, prompts: Batch, *, n: int, greedy: bool) -> Batch:
        return Batch.from_dict(
            tensors={"score": torch.ones(len(prompts) * n)},
            non_tensors={"response_text": ["x"] * (len(prompts) * n)},
        )


def _scorer(batch: Batch) -> tuple[torch.Tensor, dict]:
    return batch["score"], {}


@pytest.fixture
def without_validation(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The process's plugin manager with this plugin disabled, as a user would."""
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "validation")
    reset_plugin_manager()
    yield
    monkeypatch.delenv("HFSDK_DISABLE_PLUGINS")
    reset_plugin_manager()


def test_the_plugin_answers_hfsdk_validate() -> None:
    prompts = Batch.from_dict(tensors={"x": torch.zeros(2)})
    result = get_plugin_manager().hook.hfsdk_validate(
        algorithm=_Greedy(), prompts=prompts, scorer=_scorer, trainer_config=TrainerConfig()
    )
    assert isinstance(result, ValidationResult)
    assert result.metrics["val/pass@1"] == 1.0 and result.metrics["val/reward_mean"] == 1.0


def test_the_docs_example_works_as_written() -> None:
    section = re.search(r"^## hfsdk_validate\n(.*?)(?=^## |\Z)", DOC.read_text(), re.M | re.S)
    assert section, "hfsdk_validate is not documented"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    module = types.ModuleType("doc_example")
    module.__dict__["hfsdk"] = hfsdk
    exec(compile(blocks[1], str(DOC), "exec"), module.__dict__)
    prompts = Batch.from_dict(tensors={"x": torch.zeros(3)})
    result = module.hfsdk_validate(_Greedy(), prompts, _scorer, TrainerConfig())
    assert result == ValidationResult(metrics={"val/greedy_reward": 1.0}, samples=[])


def test_a_run_that_validates_without_the_plugin_names_it(without_validation) -> None:  # type: ignore[no-untyped-def]
    config = load_run_config("grpo", None, ["trainer.val_every=2"])
    with pytest.raises(HfsdkError) as info:
        check_features(config, validates=True)
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"trainer.val_every=2 comes with {DISTRIBUTION}")
    assert "HFSDK_DISABLE_PLUGINS" in line  # disabled here, not missing: it says so
    check_features(config, validates=False)  # no validation files: nothing validates
    check_features(load_run_config("grpo"), validates=True)  # val_every=0 by default


def test_without_the_plugin_the_cli_says_one_line_and_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "HFSDK_DISABLE_PLUGINS": "validation"}
    code = "from hfsdk.core.cli.main import main; main()"
    args = ["run", "--algo", "grpo", "--run-dir", str(tmp_path / "run"), "trainer.val_every=1"]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if DISTRIBUTION in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()  # refused before the run directory is made
