"""PPO's step() against fake roles: call order, keys handed over, metrics."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk_testing import FakeRun


def test_step_calls_roles_in_order_and_hands_over_the_keys() -> None:
    run = FakeRun.for_algorithm("ppo", rewards=[1.0, 0.0])
    metrics = run.step()
    assert run.order == [
        ("actor", "generate_sequences"),
        ("actor", "compute_log_prob"),
        ("reference", "compute_ref_log_prob"),
        ("critic", "compute_values"),
        ("reward", "score"),
        ("critic", "update_critic"),
        ("actor", "update_actor"),
    ]
    critic_update = run.calls_of("critic")[-1]
    assert {"values", "returns", "response_mask"} <= set(critic_update.keys)
    actor_update = run.calls_of("actor")[-1]
    assert {"advantages", "old_log_probs", "token_level_rewards"} <= set(actor_update.keys)
    assert metrics["reward/mean"] == pytest.approx(0.5)
    assert "actor/reward_kl" in metrics  # PPO puts KL in the reward
    assert metrics["critic/vf_loss"] == pytest.approx(
        float(run.role("critic").batches["update_critic"]["returns"].mean())
    )
    timings = {k[7:-2] for k in metrics if k.startswith("timing/")}
    assert timings == set(hfsdk.get_registry("algorithms")["ppo"].impl.timings)


def test_log_probs_and_values_are_dispatched_together() -> None:
    run = FakeRun.for_algorithm("ppo")
    run.step()
    dispatched = run.timeline[:3]
    assert {event for event, _, _ in dispatched} == {"submit"}
    assert {(role, method) for _, role, method in dispatched} == {
        ("actor", "compute_log_prob"),
        ("reference", "compute_ref_log_prob"),
        ("critic", "compute_values"),
    }


def test_returns_are_advantage_targets_from_gae() -> None:
    run = FakeRun.for_algorithm("ppo", ["advantage.whiten_advantages=false"])
    run.step()
    batch = run.role("critic").batches["update_critic"]
    mask = batch["response_mask"].bool()
    # Un-whitened GAE: returns = advantages + values on every valid token.
    diff = (batch["returns"] - batch["advantages"] - batch["values"])[mask]
    assert diff.abs().max() < 1e-5


def test_registry_names_are_looked_up_once_per_run(monkeypatch) -> None:
    """The advantage estimator and the KL estimator (KL in the reward) are resolved at their
    first use, not at every step."""
    from hfsdk.core import plugin_manager

    run = FakeRun.for_algorithm("ppo", ["algorithm.kl_in_reward=true"])
    looked_up: list[str] = []
    real = plugin_manager.get_registry

    def counting(kind: str):  # type: ignore[no-untyped-def]
        looked_up.append(kind)
        return real(kind)

    monkeypatch.setattr(plugin_manager, "get_registry", counting)
    for _ in range(3):
        run.step()
    assert looked_up.count("advantage_estimators") == 1
    assert looked_up.count("kl_estimators") == 1


def test_the_actors_config_alone_decides_whether_old_log_probs_are_computed(
    monkeypatch,
) -> None:
    """One owner: the algorithm asks the actor config's ``updates_in_one_pass``, as the
    backend does before its update; it does not read ``ppo_epochs`` itself."""
    grpo = FakeRun.for_algorithm("grpo", ["actor.mini_batch_size=64"]).algorithm
    assert not grpo.needs_old_log_probs(8)  # one epoch of one mini-batch: skipped
    actor_config = type(grpo.config.sections["actor"])
    monkeypatch.setattr(actor_config, "updates_in_one_pass", lambda self, samples: False)
    assert grpo.needs_old_log_probs(8)
