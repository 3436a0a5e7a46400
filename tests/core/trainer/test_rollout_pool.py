"""A rollout pool of its own: replicas fed the actor's weights after every update."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer import faults
from hfsdk.core.trainer.trainer import Trainer

POOLS = [
    "placement.pools.global.devices=1",
    "placement.pools.rollout.devices=1",
    "trainer.executor=ray",
    "trainer.loggers=[jsonl]",
]
SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
]
COMPARED = ("reward/mean", "response_length/mean", "actor/pg_loss", "actor/kl", "actor/grad_norm")


def _trainer(run_dir: Path, *extra: str) -> Trainer:
    return Trainer(load_run_config("grpo", None, [*SMALL, *POOLS, *extra]), run_dir, quiet=True)


def test_the_policy_on_the_rollout_pool_is_refused(tmp_path: Path) -> None:
    config = load_run_config("grpo", None, [*SMALL, "placement.pools.rollout.devices=1"])
    with pytest.raises(HfsdkError, match=r"placement.pools.rollout is the rollout replicas'"):
        Trainer(config, tmp_path / "run", quiet=True)


@pytest.mark.slow
@pytest.mark.distributed
def test_after_each_update_the_replicas_hold_the_actors_weights(tmp_path: Path) -> None:
    """Under sync the replica's log-probs of what it sampled equal the actor's before its update
    (one forward over every weight): any stale or partly synced tensor would show."""
    rows = _trainer(tmp_path / "run", "trainer.total_steps=3").fit()
    assert [r["async/rollout_weights_version"] for r in rows] == [0.0, 1.0, 2.0]
    assert [r["async/staleness_max"] for r in rows] == [0.0, 0.0, 0.0]
    for row in rows:
        assert row["rollout/log_prob_diff_max"] < 1e-5, row["step"]
    synced = [r for r in rows if "sync/bytes" in r]
    assert synced and all(r["sync/bytes"] == synced[0]["sync/bytes"] > 0 for r in synced)


@pytest.mark.slow
@pytest.mark.distributed
def test_one_step_off_replicas_sample_with_the_weights_before_the_update(tmp_path: Path) -> None:
    rows = _trainer(
        tmp_path / "run",
        "trainer.total_steps=3",
        "trainer.pipeline=one_step_off",
        "algorithm.is_correction=tis",
    ).fit()
    assert [r["async/staleness_max"] for r in rows] == [0.0, 1.0, 1.0]
    assert [r["async/rollout_weights_version"] for r in rows] == [0.0, 0.0, 1.0]
    assert rows[0]["rollout/log_prob_diff_max"] < 1e-5
    assert rows[0]["actor/is_weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert all(r["rollout/log_prob_diff_max"] > 1e-3 for r in rows[1:])


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.heavy
def test_a_killed_rollout_replica_is_restarted_and_the_run_ends_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    extra = ("trainer.total_steps=4", "trainer.save_every=2", "trainer.pipeline=one_step_off")
    straight = _trainer(tmp_path / "straight", *extra)
    expected = straight.fit()
    monkeypatch.setenv(faults.FAULT_ENV, "rollout_kill:3")
    monkeypatch.setattr(faults, "_FIRED", set())
    killed = _trainer(tmp_path / "killed", *extra)
    with caplog.at_level(logging.WARNING, logger="hfsdk.core.trainer.trainer"):
        rows = killed.fit()
    assert killed.restarts == 1
    assert any("rollout" in r.getMessage() and "restart 1" in r.getMessage() for r in caplog.records)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    for a, b in zip(expected, rows, strict=True):
        for key in (*COMPARED, "async/staleness_max"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), (a["step"], key)
