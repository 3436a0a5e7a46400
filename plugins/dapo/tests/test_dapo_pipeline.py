"""DAPO under the async pipeline: the batch generated ahead is the one trained on."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "algorithm.max_generation_rounds=2",
    "actor.mini_batch_size=8",
    "actor.micro_batch_size=8",
    "trainer.executor=local",
    "trainer.loggers=[jsonl]",
    "trainer.total_steps=2",
    "trainer.pipeline=one_step_off",
]


@pytest.mark.distributed
@pytest.mark.parametrize("correction", ["none", "tis"])
def test_one_step_off_dapo_trains_on_the_batch_generated_ahead(
    tmp_path: Path, correction: str
) -> None:
    config = load_run_config("dapo", None, [*SMALL, f"algorithm.is_correction={correction}"])
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert [r["step"] for r in rows] == [1, 2]
    # Step 2's first round is the batch generated before step 1's update (staleness 1);
    # its later rounds generate now (staleness 0). The metrics are shares of the kept rows
    # (every row was reported at the first round's staleness).
    hist = [rows[1][f"async/staleness_hist_{v}"] for v in (0, 1)]
    assert sum(hist) == pytest.approx(1.0)
    assert rows[1]["async/staleness_mean"] == pytest.approx(hist[1])
    assert rows[1]["async/staleness_max"] == float(hist[1] > 0)
    if rows[1]["dynamic_sampling/generation_rounds"] == 1:
        assert hist == [0.0, 1.0]
    if correction == "tis":
        # Every row has behaviour log-probs (later rounds' are the actor's own).
        assert rows[1]["actor/is_kept_share"] == 1.0
        assert rows[1]["actor/is_ratio_max"] > 0


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.heavy
def test_dapo_on_a_rollout_pool_with_partial_rollouts_and_tis(tmp_path: Path) -> None:
    """The first round comes from the pool (per-token versions), later rounds from the
    actor with its own behaviour log-probs; the rounds concatenate and TIS applies."""
    overrides = [
        *SMALL[:-2],
        "placement.pools.global.devices=1",
        "placement.pools.rollout.devices=1",
        "trainer.executor=ray",
        "trainer.total_steps=3",
        "trainer.pipeline=async",
        "trainer.max_staleness=1",
        "trainer.partial_rollout_tokens=2",
        "algorithm.is_correction=tis",
    ]
    rows = Trainer(load_run_config("dapo", None, overrides), tmp_path / "run", quiet=True).fit()
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(r["async/staleness_max"] <= 1 for r in rows)
    assert rows[-1]["async/staleness_max"] == 1.0
    assert all(r["actor/is_kept_share"] == 1.0 for r in rows)


def test_later_rounds_count_as_fresh_in_the_staleness_metrics() -> None:
    """A pipelined first round is stale; rounds generated within the step are not. Every
    kept row was reported at the first round's staleness (2 here, at max_staleness 2)."""
    from hfsdk_testing import FakeRun

    algorithm = FakeRun.for_algorithm("dapo").algorithm
    algorithm.metrics.update(
        {"async/staleness_mean": 2.0, "async/staleness_max": 2.0, "async/staleness_hist_0": 0.0,
         "async/staleness_hist_1": 0.0, "async/staleness_hist_2": 1.0}
    )  # fmt: skip
    algorithm._restale(0.25)  # a quarter of the kept rows came from the first round
    got = {k: v for k, v in algorithm.metrics.items() if k.startswith("async/")}
    assert got == {
        "async/staleness_mean": 0.5, "async/staleness_max": 2.0, "async/staleness_hist_0": 0.75,
        "async/staleness_hist_1": 0.0, "async/staleness_hist_2": 0.25,
    }  # fmt: skip
    algorithm._restale(0.0)  # none: every kept row is fresh
    assert algorithm.metrics["async/staleness_max"] == 0.0
