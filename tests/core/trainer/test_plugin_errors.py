"""A plugin's bug in a hook the run calls (a step observer, a tracker, a preflight check, the
prompts' tool schemas) stops the run naming the plugin and how to disable it, where it was
an hfsdk "internal error" naming nobody. What a plugin raises on purpose goes on unchanged:
its ``HfsdkError`` (a one-line refusal, ``StopRun``) and a worker's death, which the trainer
restarts after (the faults plugin's step observer kills workers)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

import hfsdk
from hfsdk.core import plugin_manager
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import build_plugin_manager, get_plugin_manager
from hfsdk.core.trainer.preflight import run_preflight_checks, run_tool_schemas
from hfsdk.core.trainer.step_observers import StepObserver, StopRun, build_step_observers
from hfsdk.core.trainer.tracking import Tracker
from hfsdk.core.trainer.trainer import Trainer
from hfsdk.core.workers.errors import WorkerDiedError

DISABLE = r"; fix or disable it \(HFSDK_DISABLE_PLUGINS={}\)$"


def _raise(exc: BaseException) -> Any:
    raise exc


def _died() -> WorkerDiedError:
    return WorkerDiedError("worker died", role="actor", rank=0, method="m", cause="SIGKILL")


class Raises(StepObserver):
    """Raises ``errors[method]`` (when set) from that method."""

    def __init__(self, errors: dict[str, BaseException]) -> None:
        self.errors = errors

    def _maybe(self, method: str) -> None:
        if method in self.errors:
            raise self.errors[method]

    def on_step_start(self, view: Any) -> None:
        self._maybe("on_step_start")

    def on_step_metrics(self, view: Any, metrics: Any) -> dict[str, float]:
        self._maybe("on_step_metrics")
        return {"peek/x": 1.0}

    def on_step_logged(self, view: Any, metrics: Any) -> None:
        self._maybe("on_step_logged")


def _observers(**errors: BaseException) -> Any:
    """The step observer 'peek' of plugin 'watcher', raising ``errors`` by method."""

    class Watcher:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_step_observers(register):  # type: ignore[no-untyped-def]
            factory = errors.get("factory")
            register("peek", lambda config, run_dir: _raise(factory) if factory else Raises(errors))

    pm = build_plugin_manager([("watcher", Watcher)], load_entry_points=False)
    return build_step_observers(None, Path("."), pm.registry("step_observers"))  # type: ignore[arg-type]


def test_an_observers_bug_names_its_plugin() -> None:
    # Before: KeyError: 'loss' (an internal error naming no plugin).
    observers = _observers(on_step_start=KeyError("loss"))
    with pytest.raises(HfsdkError, match=r"^plugin 'watcher'.s step observer 'peek' \(on_step_st"
                       r"art\) raised KeyError: 'loss'" + DISABLE.format("watcher")) as info:  # fmt: skip
        observers.step_start(None)
    assert isinstance(info.value.__cause__, KeyError)  # --debug shows the plugin's traceback
    with pytest.raises(HfsdkError, match=r"'peek' \(on_step_metrics\) raised ZeroDivisionError"):
        _observers(on_step_metrics=ZeroDivisionError("x")).step_metrics(None, {})
    with pytest.raises(HfsdkError, match=r"^plugin 'watcher'.s step observer 'peek' \(factory\) "):
        _observers(factory=RuntimeError("no such file"))


def test_what_an_observer_raises_on_purpose_goes_on_unchanged() -> None:
    died, refusal = _died(), HfsdkError("fault point needs a rollout pool")
    full = OSError(errno.ENOSPC, "No space left on device")  # the CLI says so in one line
    for raised in (died, refusal, full, KeyboardInterrupt()):
        with pytest.raises(type(raised)) as info:
            _observers(on_step_start=raised).step_start(None)
        assert info.value is raised
    stop = StopRun("mismatch too large")
    assert _observers(on_step_logged=stop).step_logged(None, {}) is stop
    assert _observers().step_metrics(None, {}) == {"peek/x": 1.0}


class DiesOnce(StepObserver):
    """A worker "dies" at the start of step 2, once (as the faults plugin's worker_kill)."""

    died = False

    def on_step_start(self, view: Any) -> None:
        if view.step == 2 and not DiesOnce.died:
            DiesOnce.died = True
            raise _died()


def test_a_worker_death_in_an_observer_still_restarts_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Dying:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_step_observers(register):  # type: ignore[no-untyped-def]
            register("dies_once", lambda config, run_dir: DiesOnce())

    monkeypatch.setattr(DiesOnce, "died", False)
    get_plugin_manager().pm.register(Dying, name="dying")
    overrides = ["data.batch_size=2", "algorithm.n_samples_per_prompt=2",
                 "actor.mini_batch_size=4", "actor.micro_batch_size=4",
                 "rollout.max_response_length=4", "trainer.total_steps=2"]  # fmt: skip
    trainer = Trainer(load_run_config("grpo", None, overrides), tmp_path / "run", quiet=True)
    metrics = trainer.fit()
    assert DiesOnce.died and trainer.restarts == 1
    assert [row["step"] for row in metrics] == [1, 2]


class StopsAtOne(StepObserver):
    """Ends the run after step 1, as a gate such as ``trainer.max_mismatch_kl`` does."""

    def on_step_logged(self, view: Any, metrics: Any) -> None:
        if view.step == 1:
            raise StopRun("mismatch too large")


def test_a_stop_by_an_observer_writes_the_runs_last_checkpoint_with_its_export(
    tmp_path: Path,
) -> None:
    # Before: step_1 was a regular save without actor_hf (hf_export: end exported nothing),
    # where a SIGTERM stop at the same step did export.
    class Gate:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_step_observers(register):  # type: ignore[no-untyped-def]
            register("gate", lambda config, run_dir: StopsAtOne())

    get_plugin_manager().pm.register(Gate, name="gate")
    overrides = ["data.batch_size=2", "algorithm.n_samples_per_prompt=2",
                 "actor.mini_batch_size=4", "actor.micro_batch_size=4",
                 "rollout.max_response_length=4", "trainer.total_steps=2"]  # fmt: skip
    run_dir = tmp_path / "run"
    trainer = Trainer(load_run_config("grpo", None, overrides), run_dir, quiet=True)
    with pytest.raises(StopRun, match=r"^mismatch too large; checkpoint step_1 saved$"):
        trainer.fit()
    steps = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert steps == ["step_1"]
    assert (run_dir / "checkpoints" / "step_1" / "actor_hf" / "model.safetensors").is_file()


def _installed(monkeypatch: pytest.MonkeyPatch, name: str, plugin: object) -> None:
    """The run's plugin manager holds ``plugin`` alone (beside the core's built-ins)."""
    pm = build_plugin_manager([(name, plugin)], load_entry_points=False)
    monkeypatch.setattr(plugin_manager, "build_plugin_manager", lambda: pm)
    plugin_manager.reset_plugin_manager()


def test_a_preflight_checks_bug_names_its_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    raised: list[BaseException] = [IndexError("list index out of range")]

    class Checker:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_preflight_checks(register):  # type: ignore[no-untyped-def]
            register("shape", lambda config, spec, prepared: _raise(raised[0]))

    _installed(monkeypatch, "checker", Checker)
    # Before: IndexError: list index out of range (an internal error naming no plugin).
    with pytest.raises(HfsdkError, match=r"^plugin 'checker'.s preflight check 'shape' raised "
                       r"IndexError: list index out of range" + DISABLE.format("checker")):  # fmt: skip
        run_preflight_checks(None, None, None)  # type: ignore[arg-type]
    raised[0] = refusal = HfsdkError("notes.file='a/b' is a path; give a file name")
    with pytest.raises(HfsdkError) as info:
        run_preflight_checks(None, None, None)  # type: ignore[arg-type]
    assert info.value is refusal


def test_a_tool_schema_hooks_bug_names_its_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tools:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_prompt_tool_schemas(config):  # type: ignore[no-untyped-def]
            if config == "broken":
                raise ModuleNotFoundError("No module named 'lookup_tool'")
            return [{"type": "function", "function": {"name": "lookup"}}]

    _installed(monkeypatch, "toolsy", Tools)
    assert run_tool_schemas("fine") == [{"type": "function", "function": {"name": "lookup"}}]
    with pytest.raises(HfsdkError, match=r"^plugin 'toolsy'.s hfsdk_prompt_tool_schemas raised "
                       r"ModuleNotFoundError: No module named 'lookup_tool'"):  # fmt: skip
        run_tool_schemas("broken")


def test_a_trackers_bug_stops_the_run_naming_its_plugin(tmp_path: Path) -> None:
    class Down:
        def log(self, step: int, metrics: dict) -> None:
            raise ConnectionError("tracking server unreachable")

        def close(self) -> None:
            pass

    def sinks(factory: Any) -> Any:
        class Sinky:
            @staticmethod
            @hfsdk.hookimpl
            def hfsdk_register_trackers(register):  # type: ignore[no-untyped-def]
                register("remote", factory)

        return build_plugin_manager([("sinky", Sinky)], load_entry_points=False).registry(
            "trackers"
        )

    fix = r"; fix it or drop it from trainer.loggers, and rerun the command to resume$"
    tracker = Tracker(tmp_path, ("remote",), total_steps=2, trackers=sinks(lambda **_: Down()))
    with pytest.raises(HfsdkError, match=r"^plugin 'sinky'.s logger 'remote' \(log step 1\) "
                       r"raised ConnectionError: tracking server unreachable" + fix):  # fmt: skip
        tracker.log(1, {"a": 1.0})
    # Before: TypeError from the factory, an internal error naming no plugin.
    with pytest.raises(HfsdkError, match=r"^plugin 'sinky'.s logger 'remote' \(start\) raised T"):
        Tracker(tmp_path, ("remote",), total_steps=2, trackers=sinks(lambda: Down()))
