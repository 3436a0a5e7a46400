"""A rollout pool of its own: replicas fed the actor's weights after every update."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_faults import faults

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


def test_a_rollout_only_pools_map_keeps_the_policy_off_the_rollout_pool() -> None:
    # A whole pools map with only the rollout pool: the roles never land on the rollout
    # replicas' pool; the default pool is added beside it for them.
    config = load_run_config("grpo", None, [*SMALL, "placement.pools={rollout: {devices: 1}}"])
    assert set(config.placement.pools) == {"global", "rollout"}
    assert config.placement.pool_of("actor") == "global"


# Heavy: the quick suite syncs a rollout pool in dapo's pool test and the sync
# verification run, whose read-back catches a stale or partly synced tensor.
@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.distributed
def test_after_each_update_the_replicas_hold_the_actors_weights(tmp_path: Path) -> None:
    """Under sync each replica's log-probs of what it sampled equal the actor's before its
    update (one forward over every weight): any stale or partly synced tensor would show.
    Two replicas: the prompts are split between them, the weights broadcast to both."""
    rows = _trainer(
        tmp_path / "run", "trainer.total_steps=3", "placement.pools.rollout.devices=2"
    ).fit()
    assert [r["async/rollout_weights_version"] for r in rows] == [0.0, 1.0, 2.0]
    assert [r["async/staleness_max"] for r in rows] == [0.0, 0.0, 0.0]
    for row in rows:
        assert row["rollout/log_prob_diff_max"] < 1e-5, row["step"]
    synced = [r for r in rows if "sync/bytes" in r]
    assert synced and all(r["sync/bytes"] == synced[0]["sync/bytes"] > 0 for r in synced)


# Heavy: one_step_off's ordering is checked in process by the distill plugin's quick test.
@pytest.mark.heavy
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
def test_a_killed_rollout_replica_is_restarted_alone_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The replica dies at the start of step 3; the trainer notices it at step 3 or 4 (when
    the batch or the weight sync it waits for fails), restarts the rollout pool alone, syncs
    it and samples that step's batch again on the current weights. Nothing is retrained:
    no checkpoint exists before the last step, so a whole-session restart would show."""
    extra = (
        "trainer.total_steps=5",
        "trainer.pipeline=one_step_off",
        "algorithm.is_correction=tis",
    )
    expected = _trainer(tmp_path / "straight", *extra).fit()
    monkeypatch.setenv(faults.FAULT_ENV, "rollout_kill:3")
    monkeypatch.setattr(faults, "_FIRED", set())
    killed = _trainer(tmp_path / "killed", *extra)
    with caplog.at_level(logging.WARNING, logger="hfsdk.core.trainer.trainer"):
        rows = killed.fit()
    assert killed.restarts == 1
    warnings = [r.getMessage() for r in caplog.records]
    assert any("rollout pool alone" in m and "restart 1 of 1" in m for m in warnings), warnings
    assert not any("newest checkpoint" in m for m in warnings), warnings
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    restarted = [r["step"] for r in rows if r["async/rollout_restarts"] == 1.0]
    at = restarted[0]
    assert at in (3, 4) and restarted == list(range(at, 6))
    for a, b in zip(expected[: at - 1], rows[: at - 1], strict=True):
        for key in (*COMPARED, "async/staleness_max"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), (a["step"], key)
    # The fresh replica sampled with exactly the weights being trained: staleness 0 and its
    # log-probs equal the actor's (one forward over every synced weight).
    fresh = rows[at - 1]
    assert fresh["async/staleness_max"] == 0.0
    assert fresh["rollout/log_prob_diff_max"] < 1e-5
    assert all(r["async/staleness_max"] == 1.0 for r in rows[at:])  # full again, in bound
    for row in rows:  # the version each batch was sampled with, across the restart too
        assert row["async/rollout_weights_version"] == row["step"] - 1 - row["async/staleness_max"]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.heavy
def test_one_step_off_on_a_rollout_pool_resumes_exactly(tmp_path: Path) -> None:
    """2 + 2 steps equal 4: the checkpoint holds the batch generated ahead, the replicas
    seed each call by its number, and fresh replicas are synced with the resumed weights."""
    common = ("trainer.pipeline=one_step_off", "algorithm.is_correction=tis")
    straight = _trainer(tmp_path / "straight", *common, "trainer.total_steps=4").fit()
    _trainer(tmp_path / "resumed", *common, "trainer.total_steps=2").fit()
    resumed = _trainer(tmp_path / "resumed", *common, "trainer.total_steps=4").fit()
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]
    keys = (*COMPARED, "actor/is_weight_mean", "async/staleness_max")
    for a, b in zip(straight, resumed, strict=True):
        for key in (*keys, "async/rollout_weights_version"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), (a["step"], key)
    assert [r["async/rollout_weights_version"] for r in resumed] == [0.0, 0.0, 1.0, 2.0]


def test_partial_rollouts_without_async_and_a_rollout_pool_are_refused(tmp_path: Path) -> None:
    config = load_run_config(
        "grpo", None, [*SMALL, "trainer.pipeline=one_step_off", "trainer.partial_rollout_tokens=2"]
    )
    with pytest.raises(HfsdkError, match=r"partial_rollout_tokens=2 needs trainer.pipeline: async"):
        Trainer(config, tmp_path / "run", quiet=True)


@pytest.mark.heavy  # dapo's pool test runs partial rollouts in the quick suite
@pytest.mark.slow
@pytest.mark.distributed
def test_partial_rollouts_mix_versions_within_the_staleness_bound(tmp_path: Path) -> None:
    rows = _trainer(
        tmp_path / "run",
        "trainer.total_steps=4",
        "trainer.pipeline=async",
        "trainer.max_staleness=2",
        "trainer.partial_rollout_tokens=2",
        "rollout.temperature=3.0",  # longer responses: several segments each
    ).fit()
    assert all(r["async/staleness_max"] <= 2 for r in rows)
    assert rows[0]["async/staleness_max"] == 0.0  # nothing was updated before step 1
    # a weight update interrupted responses: they continued with newer weights
    assert max(r["async/versions_per_response_max"] for r in rows) >= 2
    for row in rows:
        shares = sum(row[f"async/staleness_hist_{s}"] for s in range(3))
        assert shares == pytest.approx(1.0)
        assert row["async/staleness_mean"] <= row["async/staleness_max"]


@pytest.mark.heavy  # a resumed Ray run; the replica's version tagging is unit-tested
@pytest.mark.distributed
def test_partial_rollouts_keep_true_staleness_across_a_resume(tmp_path: Path) -> None:
    """The fresh replicas of a resumed run count their syncs from 1; tokens still carry the
    trainer's version, so per-token staleness stays within max_staleness."""
    common = (
        "trainer.pipeline=async",
        "trainer.max_staleness=2",
        "trainer.partial_rollout_tokens=2",
        "rollout.temperature=3.0",
    )
    _trainer(tmp_path / "run", *common, "trainer.total_steps=2").fit()
    rows = _trainer(tmp_path / "run", *common, "trainer.total_steps=5").fit()
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    for row in rows:
        assert row["async/staleness_max"] <= 2, row["step"]
        # the weights of the last segment are at most max_staleness updates old ...
        assert row["step"] - 1 - 2 <= row["async/rollout_weights_version"] <= row["step"] - 1
        # ... and the fresh replicas' sync count, from the resumed version, gives the version
        # each last segment was tagged with: no false "skipped sync" restart
        assert row["async/rollout_restarts"] == 0.0, row["step"]
