"""Safe-RLHF's step() against fake roles: two critics, the cost returns from one estimation."""

from __future__ import annotations

import pytest
import torch

import hfsdk
from hfsdk_ppo.advantages import gae_advantages_and_returns
from hfsdk_testing import FakeRun, FakeSignal


def _run(*overrides: str) -> FakeRun:
    return FakeRun.for_algorithm(
        "safe_rlhf",
        list(overrides),
        signals={"cost": lambda log: FakeSignal("cost", log, [0.0, 1.0])},
        rewards=[1.0, 0.0],
    )


def test_step_calls_roles_in_order_and_hands_over_the_keys() -> None:
    run = _run()
    metrics = run.step()
    assert run.order == [
        ("actor", "generate_sequences"),
        ("actor", "compute_log_prob"),
        ("reference", "compute_ref_log_prob"),
        ("critic", "compute_values"),
        ("cost_critic", "compute_values"),
        ("reward", "score"),
        ("cost", "score"),
        ("critic", "update_critic"),
        ("cost_critic", "update_critic"),
        ("actor", "update_actor"),
    ]
    assert metrics["reward/mean"] == pytest.approx(0.5)
    assert metrics["cost/mean"] == pytest.approx(0.5)
    assert "lagrange/lambda" in metrics and "cost_critic/vf_loss" in metrics
    timings = {k[7:-2] for k in metrics if k.startswith("timing/")}
    assert timings == set(hfsdk.get_registry("algorithms")["safe_rlhf"].impl.timings)


def test_both_critics_values_are_dispatched_together() -> None:
    run = _run()
    run.step()
    values = [e for e in run.timeline if e[2] == "compute_values"]
    assert values == [
        ("submit", "critic", "compute_values"),
        ("submit", "cost_critic", "compute_values"),
        ("result", "critic", "compute_values"),
        ("result", "cost_critic", "compute_values"),
    ]


def test_cost_critic_trains_on_the_estimators_cost_returns() -> None:
    run = _run("algorithm.kl_coef=0", "advantage.gamma=0.9", "advantage.lam=0.8")
    run.step()
    actor_batch = run.role("actor").batches["update_actor"]
    cost_batch = run.role("cost_critic").batches["update_critic"]
    mask = actor_batch["response_mask"]
    # Without KL the costs are the cost scores; γ and λ are the configured ones (no fallback).
    _, expected = gae_advantages_and_returns(
        actor_batch["token_level_cost_scores"], actor_batch["cost_values"], mask, 0.9, 0.8
    )
    torch.testing.assert_close(cost_batch["returns"], expected)
    torch.testing.assert_close(cost_batch["values"], actor_batch["cost_values"])
    reward_batch = run.role("critic").batches["update_critic"]
    assert not torch.allclose(reward_batch["returns"], cost_batch["returns"])


def test_reward_and_cost_use_the_same_kl_coefficient_with_the_adaptive_controller() -> None:
    """Both signals of one step read β before the controller moves it (one β per step)."""
    run = _run(
        "algorithm.kl_in_reward=true",
        "algorithm.kl_controller=adaptive",
        "algorithm.kl_coef=0.1",
        "algorithm.kl_horizon=4",
    )
    first = run.step()
    assert first["actor/reward_kl_coef"] == pytest.approx(0.1)
    assert first["cost/kl_coef"] == first["actor/reward_kl_coef"]
    second = run.step()  # the controller moved β after the first step's KL
    assert second["actor/reward_kl_coef"] != pytest.approx(0.1)
    assert second["cost/kl_coef"] == second["actor/reward_kl_coef"]
    assert run.algorithm.kl_controller.value != second["actor/reward_kl_coef"]
