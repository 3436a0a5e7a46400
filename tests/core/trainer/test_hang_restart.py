"""An in-process worker call that hangs is interrupted, reported and the run restarted."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk.core.workers.errors import WorkerError
from hfsdk.core.workers.host import WorkerHost

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

ARGS = ["trainer.total_steps=3", "trainer.save_every=1", "trainer.executor=local",
        "trainer.worker_timeout_s=20"]  # fmt: skip


def _hang_second_update(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The 2nd ``update_actor`` call sleeps for an hour (inside the call's deadline)."""
    original = WorkerHost.execute
    calls = {"update_actor": 0}

    def execute(self: WorkerHost, role: str, method: str, *rest: Any) -> Any:
        if method == "update_actor":
            calls["update_actor"] += 1
            if calls["update_actor"] == 2:
                worker = self.roles[role]
                worker.update_actor = lambda *a, **k: time.sleep(3600)
                try:
                    return original(self, role, method, *rest)
                finally:
                    del worker.update_actor
        return original(self, role, method, *rest)

    monkeypatch.setattr(WorkerHost, "execute", execute)
    return calls


def test_a_hung_in_process_call_is_restarted_from_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _hang_second_update(monkeypatch)
    trainer = Trainer(load_run_config("grpo", None, ARGS), tmp_path / "run", quiet=True)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="hfsdk.core.trainer.trainer"):
        metrics = trainer.fit()
    assert time.monotonic() - started < 600
    assert trainer.restarts == 1 and trainer.resume_from is not None
    assert trainer.resume_from[0] == 1
    assert [row["step"] for row in metrics] == [1, 2, 3]
    report = [r.getMessage() for r in caplog.records if "worker failure" in r.getMessage()]
    assert len(report) == 1, report
    assert "role 'actor' rank 0 (pid" in report[0] and "method 'update_actor'" in report[0]
    assert "did not finish within 20 s (trainer.worker_timeout_s)" in report[0]
    assert "test_hang_restart.py" in report[0]  # the line it hung on


def test_past_max_restarts_a_hang_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hang_second_update(monkeypatch)
    config = load_run_config("grpo", None, [*ARGS, "trainer.max_restarts=0"])
    with pytest.raises(WorkerError, match=r"did not finish within 20 s.*gave up after 0"):
        Trainer(config, tmp_path / "run", quiet=True).fit()
