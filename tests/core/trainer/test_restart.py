"""A worker killed mid-run: the controller rebuilds the workers and the run finishes.

``HFSDK_FAULT_INJECT=worker_kill:3`` makes the controller SIGKILL actor rank 0's
process at the start of step 3 (after step 2's checkpoint), once. The trainer
must report the death, tear the groups and placement groups down, start them
again, resume from step_2 and end exactly where an uninterrupted run ends —
for fused and for separate colocation. With ``trainer.max_restarts=0`` the
same kill ends the run with one worker-failure line.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk.core.workers.errors import WorkerError
from hfsdk_faults import faults

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.heavy]

# Worker processes to kill: the in-process executor has none.
ARGS = ["trainer.total_steps=4", "trainer.save_every=2", "trainer.executor=ray"]
COMPARED = ("reward/mean", "response_length/mean", "actor/pg_loss", "actor/kl", "actor/grad_norm")


def _weights(run_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(run_dir / "checkpoints" / "step_4" / "actor_hf" / "model.safetensors"))


def _fit(run_dir: Path, *extra: str) -> Trainer:
    trainer = Trainer(load_run_config("grpo", None, [*ARGS, *extra]), run_dir, quiet=True)
    trainer.fit()
    return trainer


@pytest.mark.parametrize("colocation", ["fused", "separate"])
def test_a_killed_actor_worker_is_restarted_and_the_run_ends_exactly(
    colocation: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    extra = [f"placement.colocation={colocation}"]
    straight = _fit(tmp_path / "straight", *extra)
    assert straight.restarts == 0
    # HF export only at the end of the run (trainer.hf_export=end) ...
    assert not (tmp_path / "straight" / "checkpoints" / "step_2" / "actor_hf").exists()
    # ... and on request: EXPORT_HF in the run dir asks for it at the next save
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / "EXPORT_HF").touch()
    monkeypatch.setenv(faults.FAULT_ENV, "worker_kill:3")
    monkeypatch.setattr(faults, "_FIRED", set())
    with caplog.at_level(logging.WARNING, logger="hfsdk.core.trainer.trainer"):
        killed = _fit(tmp_path / "killed", *extra)
    assert killed.restarts == 1 and killed.resume_from is not None
    assert killed.resume_from[0] == 2
    report = [r.getMessage() for r in caplog.records if "worker failure" in r.getMessage()]
    assert len(report) == 1 and "role 'actor' rank 0 (pid" in report[0], report
    assert "died during method" in report[0] and "restart 1 of 1" in report[0]
    a, b = _metrics(tmp_path / "straight"), _metrics(tmp_path / "killed")
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert (tmp_path / "killed" / "checkpoints" / "step_2" / "actor_hf" / "config.json").exists()
    assert not (tmp_path / "killed" / "EXPORT_HF").exists()
    for x, y in zip(a, b, strict=True):
        for key in COMPARED:
            assert x[key] == pytest.approx(y[key], rel=1e-5, abs=1e-7), (x["step"], key)
    wa, wb = _weights(tmp_path / "straight"), _weights(tmp_path / "killed")
    for name in wa:
        assert (wa[name] - wb[name]).abs().max().item() < 1e-6, name


def test_past_max_restarts_the_run_stops_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(faults.FAULT_ENV, "worker_kill:1")
    monkeypatch.setattr(faults, "_FIRED", set())
    trainer = Trainer(
        load_run_config("grpo", None, [*ARGS, "trainer.max_restarts=0"]),
        tmp_path / "run",
        quiet=True,
    )
    with pytest.raises(WorkerError) as info:
        trainer.fit()
    message = str(info.value)
    assert "\n" not in message and "role 'actor' rank 0" in message
    assert "gave up after 0 restart(s); trainer.max_restarts=0" in message


def _metrics(run_dir: Path) -> list[dict]:
    from hfsdk.core.trainer.tracking import read_metrics

    return read_metrics(run_dir)
