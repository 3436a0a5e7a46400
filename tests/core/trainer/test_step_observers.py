"""The runtime's seams, run as docs/plugin_hooks.md shows them: a plugin contributes a
config section, a step observer and a preflight check, and a real run uses all three."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import ConfigError, HfsdkError
from hfsdk.core.plugin_manager import get_registry
from hfsdk.core.trainer.trainer import Trainer
from tests.conftest import make_distribution

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"
HOOKS = (
    "hfsdk_register_config_sections",
    "hfsdk_register_step_observers",
    "hfsdk_register_preflight_checks",
)
SMALL = [
    "data.batch_size=2",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=4",
    "rollout.max_response_length=4",
    "trainer.total_steps=2",
]


def _example(hook: str) -> str:
    """The second python block of the hook's section (the first is its signature)."""
    section = re.search(rf"^## {hook}\n(.*?)(?=^## |\Z)", DOC.read_text(), re.M | re.S)
    assert section is not None, hook
    return re.findall(r"```python\n(.*?)```", section.group(1), re.S)[1]


@pytest.fixture
def notes_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three doc examples, as written, installed as one plugin distribution."""
    source = "\n\n".join(_example(hook) for hook in HOOKS)
    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "notes-plugin", "notes", "notes_plugin", source)
    monkeypatch.syspath_prepend(str(site))


def test_the_doc_examples_run_in_a_real_run(notes_plugin: None, tmp_path: Path) -> None:
    assert {"notes"} <= set(get_registry("config_sections"))
    config = load_run_config("grpo", None, [*SMALL, "notes.file=steps.txt"])
    assert config.sections["notes"].file == "steps.txt"
    assert "notes:" in config.to_yaml()
    run_dir = tmp_path / "run"
    metrics = Trainer(config, run_dir, quiet=True).fit()
    # each step trained on batch_size x n_samples_per_prompt = 4 samples
    assert [row["notes/samples"] for row in metrics] == [4.0, 4.0]
    # the session's call clock reaches the trainer: every step made blocking worker calls
    assert all(row["perf/worker_calls"] >= 2 for row in metrics)
    lines = (run_dir / "steps.txt").read_text().splitlines()
    assert lines == ["step 1: 4 samples", "step 2: 4 samples"]


def test_a_preflight_check_refuses_before_the_run_dir_exists(
    notes_plugin: None, tmp_path: Path
) -> None:
    config = load_run_config("grpo", None, [*SMALL, "notes.file=a/b.txt"])
    with pytest.raises(HfsdkError, match=r"notes.file='a/b.txt' is a path"):
        Trainer(config, tmp_path / "run", quiet=True)
    assert not (tmp_path / "run").exists()


def test_a_contributed_section_is_validated_like_the_core_ones(notes_plugin: None) -> None:
    with pytest.raises(ConfigError, match=r"notes"):
        load_run_config("grpo", None, ["notes.fiel=x"])


def test_without_the_plugin_the_section_is_unknown() -> None:
    with pytest.raises(ConfigError, match=r"unknown config section 'notes'"):
        load_run_config("grpo", None, ["notes.file=x"])


def test_the_core_registers_its_config_sections() -> None:
    assert {"trainer", "data", "placement"} <= set(get_registry("config_sections"))
