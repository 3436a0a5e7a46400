"""Generation ahead of training and a rollout pool come from ``hfsdk_build_generation_pipeline``:
with no plugin implementing it such a run is refused in one line naming the distribution
(exit 2, no run directory), and a ``sync`` run without a rollout pool needs none."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import hfsdk
from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager
from hfsdk.core.trainer.preflight import PIPELINES, check_features
from hfsdk.core.trainer.trainer import Trainer


@pytest.fixture
def no_pipeline_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plugin manager with every plugin that implements the hook disabled."""
    reset_plugin_manager()
    hook = get_plugin_manager().hook.hfsdk_build_generation_pipeline
    names = [impl.plugin_name for impl in hook.get_hookimpls()]
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", ",".join(names))
    reset_plugin_manager()
    yield
    monkeypatch.delenv("HFSDK_DISABLE_PLUGINS")
    reset_plugin_manager()


@pytest.mark.parametrize(
    ("overrides", "what"),
    [
        (["trainer.pipeline=one_step_off"], "trainer.pipeline=one_step_off"),
        (["trainer.pipeline=async"], "trainer.pipeline=async"),
        (["placement.pools.rollout.devices=1"], "placement.pools.rollout"),
    ],
)
def test_without_a_pipeline_plugin_the_run_is_refused_in_one_line(
    no_pipeline_plugins: None, overrides: list[str], what: str
) -> None:
    assert not get_plugin_manager().hook.hfsdk_build_generation_pipeline.get_hookimpls()
    with pytest.raises(HfsdkError) as info:
        check_features(load_run_config("grpo", None, overrides))
    line = str(info.value)
    assert line.startswith(f"{what} comes with {PIPELINES}") and "\n" not in line


def test_a_sync_run_without_a_rollout_pool_needs_no_pipeline_plugin(
    no_pipeline_plugins: None,
) -> None:
    config = load_run_config("grpo", None, [])
    check_features(config)  # not refused
    trainer = types.SimpleNamespace(config=config)
    assert Trainer._build_pipeline(trainer, None, None) is None  # type: ignore[arg-type]


def test_the_cli_exits_2_and_leaves_no_run_directory(
    no_pipeline_plugins: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    args = ["run", "--algo", "grpo", "--quiet", "--run-dir", str(run_dir)]
    with pytest.raises(SystemExit) as info:
        main([*args, "trainer.total_steps=1", "trainer.pipeline=one_step_off"])
    assert info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and PIPELINES in lines[0], lines
    assert not run_dir.exists()


class _AnswersNone:
    @hfsdk.hookimpl
    def hfsdk_build_generation_pipeline(self, config: object) -> None:
        return None


def test_a_plugin_that_answers_none_is_one_line_not_a_silent_sync_run(
    no_pipeline_plugins: None,
) -> None:
    config = load_run_config("grpo", None, ["trainer.pipeline=one_step_off"])
    get_plugin_manager().pm.register(_AnswersNone(), name="answers_none")
    check_features(config)  # a plugin implements it: the preflight lets it through
    trainer = types.SimpleNamespace(config=config)
    with pytest.raises(HfsdkError, match=r"answered None; install hfsdk-plugin-pipelines"):
        Trainer._build_pipeline(trainer, None, None)  # type: ignore[arg-type]
