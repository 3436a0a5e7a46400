"""ReMax's step() against fake roles: the greedy baseline never overwrites the sampled metrics."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk_testing import FakeRun


def test_greedy_baseline_is_scored_but_not_logged_as_the_reward() -> None:
    run = FakeRun.for_algorithm("remax", rewards=[1.0, 0.0], greedy_reward=0.25)
    metrics = run.step()
    assert run.order == [
        ("actor", "generate_sequences"),
        ("actor", "compute_log_prob"),
        ("reference", "compute_ref_log_prob"),
        ("actor", "generate_sequences"),
        ("reward", "score"),
        ("reward", "score"),
        ("actor", "update_actor"),
    ]
    generations = [c for c in run.calls_of("actor") if c.method == "generate_sequences"]
    assert [c.greedy for c in generations] == [False, True]
    scores = run.calls_of("reward")
    assert [c.greedy for c in scores] == [False, True]
    # The sampled responses' metrics survive the baseline's scoring.
    assert metrics["reward/mean"] == pytest.approx(0.5)
    assert metrics["reward/fn_mean"] == pytest.approx(0.5)
    assert metrics["reward/greedy_baseline_mean"] == pytest.approx(0.25)
    timings = {k[7:-2] for k in metrics if k.startswith("timing/")}
    assert timings == set(hfsdk.get_registry("algorithms")["remax"].impl.timings)


def test_advantages_are_reward_minus_greedy_baseline() -> None:
    run = FakeRun.for_algorithm(
        "remax", ["algorithm.kl_coef=0"], rewards=[1.0, 0.0], greedy_reward=0.25
    )
    run.step()
    batch = run.role("actor").batches["update_actor"]
    mask = batch["response_mask"].bool()
    for i in range(len(batch)):
        expected = (1.0 if i % 2 == 0 else 0.0) - 0.25
        assert batch["advantages"][i][mask[i]].tolist() == pytest.approx(
            [expected] * int(mask[i].sum())
        )
