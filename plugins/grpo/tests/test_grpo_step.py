"""GRPO's step() against fake roles: call order, keys handed over, metrics, advantages."""

from __future__ import annotations

import pytest
import torch

import hfsdk
from hfsdk_testing import FakeRun


def _timings(metrics: dict[str, float]) -> set[str]:
    return {k[len("timing/") : -len("_s")] for k in metrics if k.startswith("timing/")}


def test_step_calls_roles_in_order_and_hands_over_the_keys() -> None:
    run = FakeRun.for_algorithm("grpo", rewards=[1.0, 0.0])
    metrics = run.step()
    # 8 samples in one mini-batch of 32, one epoch, KL not in the reward: exactly
    # on-policy, so the separate old-log-prob pass is skipped.
    assert run.order == [
        ("actor", "generate_sequences"),
        ("reference", "compute_ref_log_prob"),
        ("reward", "score"),
        ("actor", "update_actor"),
    ]
    update = run.calls_of("actor")[-1]
    assert {"advantages", "ref_log_probs", "response_mask"} <= set(update.keys)
    assert len(run.role("actor").batches["update_actor"]) == 2 * 4  # n_samples_per_prompt=4
    assert metrics["reward/mean"] == pytest.approx(0.5)
    assert metrics["reward/fn_mean"] == pytest.approx(0.5)
    # The stages step() times are exactly those the spec (and the planner) declares.
    spec = hfsdk.get_registry("algorithms")["grpo"].impl
    assert _timings(metrics) == set(spec.timings) - {"old_log_prob"}


def test_group_advantages_reach_the_actor() -> None:
    run = FakeRun.for_algorithm("grpo", rewards=[1.0, 0.0])
    run.step()
    batch = run.role("actor").batches["update_actor"]
    mask = batch["response_mask"].bool()
    per_sample = [float(batch["advantages"][i][mask[i]].mean()) for i in range(len(batch))]
    # Within each group of 4, rewards alternate 1, 0: mean 0.5, std(unbiased) 0.577.
    expected = 0.5 / torch.tensor([1.0, 0.0, 1.0, 0.0]).std().item()
    for i, value in enumerate(per_sample):
        assert value == pytest.approx(expected if i % 2 == 0 else -expected, rel=1e-4)


def test_timing_an_undeclared_stage_is_an_error() -> None:
    run = FakeRun.for_algorithm("grpo")
    with pytest.raises(hfsdk.HfsdkError, match="does not declare"), run.algorithm.stage("values"):
        pass
