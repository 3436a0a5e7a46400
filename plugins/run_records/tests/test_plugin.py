"""The run-records plugin through its hooks: the dump observer only when asked for, its
commands, and one line naming the distribution when a config asks for it while it is off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hfsdk import HfsdkError, get_plugin_manager, get_registry
from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk.core.trainer.preflight import check_features
from hfsdk_run_records.rollout_dump import RolloutDumpObserver
from hfsdk_run_records.step_dump import DumpedGenerations

DISTRIBUTION = "hfsdk-plugin-run-records"


@pytest.fixture
def without_run_records(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The process's plugin manager with this plugin disabled, as a user would."""
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "run_records")
    reset_plugin_manager()
    yield
    monkeypatch.delenv("HFSDK_DISABLE_PLUGINS")
    reset_plugin_manager()


def test_the_dump_observer_is_built_only_when_a_run_asks_for_it() -> None:
    entry = get_registry("step_observers")["rollout_dump"]
    assert entry.plugin == "run_records"
    assert entry.impl(load_run_config("grpo"), Path(".")) is None  # off by default
    for override in ("trainer.rollout_dump=true", "trainer.mode=rollout_only"):
        observer = entry.impl(load_run_config("grpo", None, [override]), Path("."))
        assert isinstance(observer, RolloutDumpObserver), override


def test_the_shared_run_dir_check_sees_every_workers_node_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from hfsdk_run_records import shared_run_dir

    entry = get_registry("step_observers")["shared_run_dir"]
    observer = entry.impl(load_run_config("grpo"), Path("run"))
    calls = []
    monkeypatch.setattr(shared_run_dir, "check_run_dir_shared", lambda d, n: calls.append((d, n)))
    groups = {"actor": SimpleNamespace(process_info=[{"node_id": "a"}, {"node_id": "b"}]),
              "rollout": SimpleNamespace(process_info=[{"node_id": "c"}])}  # fmt: skip
    view = SimpleNamespace(session=SimpleNamespace(groups=groups))
    observer.on_step_start(view)
    observer.on_step_start(view)  # the second step probes nothing again
    assert calls == [(Path("run"), ["a", "b", "c"])]


def test_train_only_gets_the_dumped_generations_of_rollouts_from(tmp_path: Path) -> None:
    (tmp_path / "rollouts").mkdir()
    config = load_run_config(
        "grpo", None, ["trainer.mode=train_only", f"trainer.rollouts_from={tmp_path}"]
    )
    source = get_plugin_manager().hook.hfsdk_recorded_generations(config=config)
    assert isinstance(source, DumpedGenerations) and source.run_dir == tmp_path
    check_features(config)  # the plugin is here: nothing refused


def test_replay_and_export_are_the_plugins_commands(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("replay", "export"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        assert "RUN_DIR" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("overrides", "what"),
    [
        (["trainer.rollout_dump=true"], "trainer.rollout_dump=true"),
        (["trainer.mode=rollout_only"], "trainer.mode=rollout_only"),
        (["trainer.mode=train_only", "trainer.rollouts_from=/x"], "trainer.mode=train_only"),
    ],
)
def test_a_config_asking_for_run_records_without_the_plugin_names_it(
    without_run_records, overrides: list[str], what: str
) -> None:  # type: ignore[no-untyped-def]
    assert "rollout_dump" not in get_registry("step_observers")
    config = load_run_config("grpo", None, overrides)  # the keys stay the core's
    with pytest.raises(HfsdkError) as info:
        check_features(config)
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"{what} comes with {DISTRIBUTION}"), line
    assert "HFSDK_DISABLE_PLUGINS" in line  # disabled here, not missing: it says so
    check_features(load_run_config("grpo"))  # a run that keeps no records needs no plugin


def _hfsdk_without_the_plugin(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HFSDK_DISABLE_PLUGINS": "run_records"}
    code = "from hfsdk.core.cli.main import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_without_the_plugin_the_cli_says_one_line_and_exits_2(tmp_path: Path) -> None:
    done = _hfsdk_without_the_plugin(
        "run", "--algo", "grpo", "--run-dir", str(tmp_path / "run"), "trainer.rollout_dump=true"
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if DISTRIBUTION in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()  # refused before the run directory is made
    for command in (["replay", str(tmp_path), "--step", "1"], ["export", str(tmp_path)]):
        done = _hfsdk_without_the_plugin(*command)
        assert done.returncode == 2, done.stderr
        assert f"`hfsdk {command[0]}` comes with {DISTRIBUTION}" in done.stderr
        assert "Traceback" not in done.stderr
