"""The stop-signal handlers: a request first, the grace period, a second signal at once."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import hfsdk
from hfsdk.core.plugin_manager import get_plugin_manager
from hfsdk.core.trainer.step_observers import StepObserver
from hfsdk.core.trainer.stopping import RunStopped, StopNow, StopSignals, signal_name


def test_the_first_signal_only_asks_and_the_grace_then_abandons() -> None:
    # A grace long enough that a loaded machine's scheduling cannot use it up before the
    # sleep below starts (the test asserts only that the sleep is cut short).
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    stop = StopSignals(grace_s=3.0)
    assert stop.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        # The handler runs at the next bytecode boundary: the request is recorded,
        # nothing is interrupted yet.
        assert stop.requested and stop.signum == signal.SIGTERM and not stop.abandoned
        started = time.monotonic()
        with pytest.raises(StopNow, match=r"not done within trainer.stop_grace_s=3 s"):
            time.sleep(30)
        assert time.monotonic() - started < 10
    finally:
        stop.uninstall()
    # The handlers that were there before (the defaults, or an earlier test's Ray's) are back.
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_second_signal_stops_at_once_and_a_third_is_ignored() -> None:
    stop = StopSignals(grace_s=0)  # no grace limit
    stop.install()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        assert stop.signum == signal.SIGINT
        with pytest.raises(StopNow, match="a second SIGINT"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        os.kill(os.getpid(), signal.SIGINT)  # tearing down: not interrupted again
        time.sleep(0.1)
    finally:
        stop.uninstall()


def test_the_log_line_names_the_step_being_finished(caplog: pytest.LogCaptureFixture) -> None:
    stop = StopSignals(grace_s=0)
    stop.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # while loading or resuming: no step yet
        time.sleep(0.1)
    finally:
        stop.uninstall()
    assert "SIGTERM received: stopping before the next step starts, with nothing" in caplog.text
    assert "finishing step 0" not in caplog.text  # before: as if a step 0 were running
    caplog.clear()
    stop = StopSignals(grace_s=0)
    stop.install()
    stop.step = 4
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
    finally:
        stop.uninstall()
    assert "SIGTERM received: finishing step 4 and writing a checkpoint" in caplog.text


def test_a_disarmed_grace_does_not_fire() -> None:
    stop = StopSignals(grace_s=0.3)
    stop.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        stop.disarm()
        time.sleep(0.6)  # would have raised StopNow here
    finally:
        stop.uninstall()


def test_run_stopped_carries_the_exit_status() -> None:
    assert RunStopped("x", signum=signal.SIGTERM, step=3).exit_code == 143
    assert RunStopped("x", signum=signal.SIGINT, step=None).exit_code == 130
    assert signal_name(15) == "SIGTERM"


def test_a_stop_that_ray_wrapped_in_a_system_error_still_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Raised by a signal handler inside Ray's Cython waits (ray.wait, ray.get), StopNow comes
    # out as "SystemError: <cyfunction CoreWorker.wait> returned a result with an exception
    # set" caused by it: a second Ctrl-C during a Ray run ended as an internal error, exit 1.
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    trainer = Trainer(load_run_config("grpo", None, ["trainer.total_steps=1"]), tmp_path / "run")

    def attempt() -> None:
        try:
            raise StopNow("a second SIGINT")
        except StopNow as exc:
            raise SystemError(
                "<cyfunction CoreWorker.wait> returned a result with an exception set"
            ) from exc

    monkeypatch.setattr(trainer, "_attempt", attempt)
    with pytest.raises(RunStopped, match=r"stopped by SIGTERM during step 0 \(a second SIGINT\)"):
        trainer.fit()
    monkeypatch.setattr(trainer, "_attempt", lambda: (_ for _ in ()).throw(SystemError("other")))
    with pytest.raises(SystemError, match="other"):  # any other SystemError is not a stop
        trainer.fit()


class SignalsAt(StepObserver):
    """Sends the controller a SIGTERM as step ``at`` starts, as a scheduler does mid-step."""

    at = 0

    def on_step_start(self, view: Any) -> None:
        if view.step == SignalsAt.at:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_stop_during_the_last_step_completes_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    class Signaller:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_step_observers(register):  # type: ignore[no-untyped-def]
            register("signals_at", lambda config, run_dir: SignalsAt())

    get_plugin_manager().pm.register(Signaller, name="signaller")
    overrides = ["data.batch_size=2", "algorithm.n_samples_per_prompt=2",
                 "actor.mini_batch_size=4", "actor.micro_batch_size=4",
                 "rollout.max_response_length=4", "trainer.total_steps=2"]  # fmt: skip
    run_dir = tmp_path / "run"
    root = run_dir / "checkpoints"

    def fit() -> list[dict]:
        return Trainer(load_run_config("grpo", None, overrides), run_dir, quiet=True).fit()

    # Step 1 of 2: the run is cut short, its checkpoint written, and the rerun resumes.
    monkeypatch.setattr(SignalsAt, "at", 1)
    stopped = r"^stopped by SIGTERM at step 1: checkpoint step_1 written; rerun"
    with pytest.raises(RunStopped, match=stopped) as e:
        fit()
    assert e.value.exit_code == 143 and (root / "step_1" / "COMPLETE").is_file()
    # The last step: the run completed, so it ends as one (before: RunStopped, exit 143,
    # "rerun the same command to resume", and the rerun had nothing left to do).
    monkeypatch.setattr(SignalsAt, "at", 2)
    assert [row["step"] for row in fit()] == [1, 2]
    assert (root / "step_2" / "COMPLETE").is_file()
    assert (root / "step_2" / "actor_hf" / "model.safetensors").is_file()
