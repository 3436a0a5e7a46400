"""A tp=2 megatron actor generating at tp=1 (3D-HybridEngine): ``trainer.deterministic``
repeats bitwise, every transition is verified, and a lost piece stops the run in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import default_task_assets
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_testing import assert_runs_identical

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.heavy]


def _args() -> list[str]:
    model = str(default_task_assets().model_dir)
    return [
        "data.batch_size=4",
        "algorithm.n_samples_per_prompt=2",
        "actor.mini_batch_size=4",
        "actor.micro_batch_size=2",
        f"actor.model_path={model}",
        "actor.backend=megatron",
        "actor.parallel.tp=2",
        "actor.rollout_layout.tp=1",
        "reference.backend=megatron",
        "reference.parallel.tp=2",
        "placement.pools.global.devices=2",
        "trainer.loggers=[jsonl]",
        "trainer.total_steps=2",
        "trainer.deterministic=true",
    ]


def test_two_runs_of_a_tp2_megatron_actor_are_bitwise_identical(tmp_path: Path) -> None:
    args = _args()
    runs = [
        Trainer(load_run_config("grpo", None, args), tmp_path / name, quiet=True).fit()
        for name in ("a", "b")
    ]
    assert_runs_identical(tmp_path / "a", runs[0], tmp_path / "b", runs[1], 2)
    # tp=2 -> tp=1: each rank received the other's half, and every piece was verified.
    assert all(r["perf/reshard_bytes"] > 0 and r["sync/verified"] == 1.0 for r in runs[0])


def test_a_piece_lost_in_the_transition_stops_the_run_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk.core.workers.errors import WorkerError
    from hfsdk_faults import faults

    monkeypatch.setenv(faults.FAULT_ENV, "reshard_drop:2")  # the workers get it too
    trainer = Trainer(load_run_config("grpo", None, _args()), tmp_path / "run", quiet=True)
    with pytest.raises(WorkerError) as info:
        trainer.fit()
    first = str(info.value).splitlines()[0]
    assert "3D-HybridEngine transition 2 (" in first, first
    assert "piece(s) that differ from what was sent" in first, first
