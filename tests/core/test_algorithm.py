"""Algorithm building blocks: concurrent stages and stage names."""

from __future__ import annotations

import pytest

from hfsdk import HfsdkError
from hfsdk_testing import FakeRun, fake_prompts


def test_concurrently_dispatches_every_call_before_waiting_and_returns_results_in_order() -> None:
    run = FakeRun.for_algorithm("ppo")
    algo = run.algorithm
    batch = algo.generate(fake_prompts(2))
    run.timeline.clear()
    values, ref = algo.concurrently(
        batch,
        [
            ("values", algo.role("critic").compute_values),
            ("ref_log_prob", algo.role("reference").compute_ref_log_prob),
        ],
    )
    assert run.timeline == [
        ("submit", "critic", "compute_values"),
        ("submit", "reference", "compute_ref_log_prob"),
        ("result", "critic", "compute_values"),
        ("result", "reference", "compute_ref_log_prob"),
    ]
    assert set(values.keys()) == {"values"} and set(ref.keys()) == {"ref_log_probs"}
    assert algo.metrics["timing/values_s"] >= 0.0
    assert algo.metrics["timing/ref_log_prob_s"] >= algo.metrics["timing/values_s"]


def test_concurrently_runs_controller_callables_between_dispatch_and_results() -> None:
    run = FakeRun.for_algorithm("ppo")
    algo = run.algorithm
    batch = algo.generate(fake_prompts(2))
    run.timeline.clear()

    def on_controller(b: object) -> str:
        run.timeline.append(("controller", "-", "score"))
        return "scored"

    out = algo.concurrently(
        batch, [("values", algo.role("critic").compute_values), ("reward", on_controller)]
    )
    assert out[1] == "scored"
    assert run.timeline[0] == ("submit", "critic", "compute_values")
    assert run.timeline[1:] == [
        ("result", "critic", "compute_values"),
        ("controller", "-", "score"),
    ]


def test_concurrently_refuses_an_undeclared_stage_before_dispatching() -> None:
    run = FakeRun.for_algorithm("grpo")
    algo = run.algorithm
    batch = algo.generate(fake_prompts(2))
    run.timeline.clear()
    with pytest.raises(HfsdkError, match=r"'critic_values'.*does not declare"):
        algo.concurrently(
            batch,
            [
                ("ref_log_prob", algo.role("reference").compute_ref_log_prob),
                ("critic_values", algo.role("reference").compute_ref_log_prob),
            ],
        )
    assert run.timeline == []


def test_actor_kl_is_the_non_negative_k3_estimate() -> None:
    """Sampled tokens the reference likes more than the policy: k1's mean is negative, the
    reported KL (k3) is not, and it equals exp(r) - r - 1 averaged over response tokens."""
    import math

    import torch

    from hfsdk.core.batch import Batch

    algorithm = FakeRun.for_algorithm("grpo").algorithm
    old = torch.tensor([[-2.0, -1.0, 0.0], [-0.5, -3.0, 0.0]])
    ref = torch.tensor([[-1.0, -0.5, 0.0], [-0.25, -2.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    batch = Batch.from_dict(
        {
            "old_log_probs": old,
            "ref_log_probs": ref,
            "response_mask": mask,
            "attention_mask": torch.ones(2, 3, dtype=torch.long),
        }
    )
    metrics = algorithm.finish(batch)
    r = [1.0, 0.5, 0.25, 1.0]  # ref - old on the four response tokens
    expected = sum(math.exp(x) - x - 1 for x in r) / 4
    assert float((old - ref)[mask.bool()].mean()) < 0  # what k1 would have reported
    assert metrics["actor/kl"] == pytest.approx(expected, rel=1e-6)


def test_an_advantage_estimator_registered_without_a_config_class_gets_config_none() -> None:
    """config_cls is optional: such an estimator has no ``advantage`` section to be given."""
    import torch

    import hfsdk
    from hfsdk.core.batch import Batch
    from hfsdk.core.plugin_manager import get_plugin_manager

    seen = []

    def plain(*, token_level_rewards, response_mask, config=None, **unused):  # type: ignore[no-untyped-def]
        seen.append(config)
        a = token_level_rewards.sum(-1, keepdim=True) * response_mask
        return hfsdk.AdvantageResult(advantages=a, returns=a)

    class Plain:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_advantage_estimators(register):  # type: ignore[no-untyped-def]
            register("plain_adv", plain)

    get_plugin_manager().pm.register(Plain, name="plain_adv")
    run = FakeRun.for_algorithm("grpo", ["algorithm.advantage_estimator=plain_adv"])
    mask = torch.ones(2, 3)
    batch = Batch.from_dict({"token_level_rewards": mask, "response_mask": mask})
    batch["uid"] = ["a", "b"]
    # Before: AttributeError: run config has no section 'advantage'
    run.algorithm.estimate_advantages(batch)
    assert seen == [None]
