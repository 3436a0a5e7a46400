"""What the actor accepts from a policy loss, and the KL metrics it reports beside it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hfsdk import Batch, HfsdkError, LossAggregation, LossCounts, aggregate_loss, get_registry
from hfsdk_backend_common.engine_support import MetricAccumulator
from hfsdk_backend_common.objectives import ActorObjective, actor_micro_loss

OLD = torch.tensor([[-1.0, -2.0, -0.5, 0.0], [-1.0, -1.0, 0.0, 0.0]])
REF = torch.tensor([[-1.5, -1.0, -0.5, -9.0], [-2.0, -1.0, -9.0, -9.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
COUNTS = LossCounts(tokens=5.0, sequences=2.0)


def _good_matrix(log_prob: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    return -advantages * torch.exp(log_prob - log_prob.detach())


def _loss_returning(kind: str):
    """A policy loss with one of the mistakes a plugin made (``REVIEW_BUG`` in the review)."""

    def fn(*, log_prob, old_log_prob, advantages, response_mask, config=None, aggregation=None):
        loss = aggregate_loss(_good_matrix(log_prob, advantages), response_mask, aggregation)
        per_sequence = _good_matrix(log_prob, advantages).sum(-1)
        metrics = {"pg_clipfrac": 0.0, "ppo_kl": 0.0}
        returned: dict[str, Any] = {
            "float": (float(loss.detach()), metrics),
            "shape": (per_sequence, metrics),
            "detach": (loss.detach(), metrics),
            "list_metrics": (loss, [0.0]),
            "bare": loss,
            "no_metrics": (loss, {}),
        }
        return returned[kind]

    fn.__name__ = f"loss_{kind}"
    return fn


def _run(
    objective: ActorObjective,
    *,
    with_old: bool = True,
    reference: bool = False,
    grad: bool = True,
) -> tuple[torch.Tensor, dict[str, float]]:
    tensors = {"response_mask": MASK, "advantages": torch.ones(2, 4)}
    if with_old:
        tensors["old_log_probs"] = OLD
    if reference:
        tensors["ref_log_probs"] = REF
    log_prob = (OLD + 0.1).requires_grad_(grad)
    metrics = MetricAccumulator()
    loss = actor_micro_loss(
        objective,
        Batch.from_dict(tensors=tensors),
        log_prob,
        torch.zeros(2, 4),
        aggregation=LossAggregation.from_counts("token-mean", COUNTS),
        counts=COUNTS,
        has_reference=reference,
        metrics=metrics,
    )
    metrics.end_minibatch()
    return loss, metrics.result()


def _registered(kind: str) -> ActorObjective:
    return ActorObjective(
        policy_loss=_loss_returning(kind), policy_loss_name="my_gspo", policy_loss_plugin="mine"
    )


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("float", "returned a float as its loss; expected a 0-dim tensor"),
        ("shape", r"returned a tensor of shape \(2,\) as its loss; expected a 0-dim tensor"),
        ("detach", "returned a loss without a gradient"),
        ("list_metrics", "returned a list as its metrics; expected a mapping"),
        ("bare", r"returned a tensor of shape \(\); expected a \(loss, metrics\) pair"),
    ],
)
def test_an_unusable_policy_loss_result_is_one_line_naming_the_loss(kind: str, said: str) -> None:
    # Before: float and (B,) failed with bare torch errors; a detached loss trained nothing.
    with pytest.raises(HfsdkError, match=f"policy loss 'my_gspo' \\(plugin 'mine'\\) {said}"):
        _run(_registered(kind))


def test_an_unregistered_loss_is_named_by_its_function() -> None:
    with pytest.raises(HfsdkError, match="policy loss 'loss_float' returned a float"):
        _run(ActorObjective(policy_loss=_loss_returning("float")))


def test_a_loss_without_gradient_is_accepted_where_log_prob_has_none() -> None:
    loss, _ = _run(_registered("detach"), grad=False)
    assert loss.dim() == 0


def test_the_clip_metrics_are_optional() -> None:
    loss, metrics = _run(_registered("no_metrics"))
    assert loss.requires_grad and "actor/pg_clipfrac" not in metrics


def test_the_objective_of_a_run_names_its_loss_and_plugin() -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk_backend_common.objectives import actor_objective_from

    config = load_run_config("grpo", None, ["algorithm.policy_loss=gspo"])
    terms = get_registry("algorithms")["grpo"].impl.actor_objective(config.algorithm)
    objective = actor_objective_from(config, terms)
    assert objective.policy_loss_label == "policy loss 'gspo' (plugin 'grpo')"


def test_a_loss_agg_mode_outside_the_known_ones_is_refused_with_the_config() -> None:
    """An algorithm config class that redeclares loss_agg_mode (to change its default) loses
    the core field's validator; the plugin's config check still refuses a bad mode."""
    from types import SimpleNamespace

    from hfsdk_backend_common.objectives import loss_agg_mode_problems

    ok = SimpleNamespace(algorithm=SimpleNamespace(loss_agg_mode="token-mean"))
    assert loss_agg_mode_problems(ok) is None
    bad = SimpleNamespace(algorithm=SimpleNamespace(loss_agg_mode="seq-mean"))
    (line,) = loss_agg_mode_problems(bad) or [""]
    assert line.startswith("algorithm.loss_agg_mode is 'seq-mean'; expected one of token-mean")


def test_a_kl_loss_coefficient_beside_kl_in_the_reward_is_warned_about() -> None:
    """PPO puts the KL in the reward, so a kl_loss_coef the user set did nothing, silently. A
    warning, not a refusal: a run saved with such a config still resumes. GRPO's own default
    coefficient (0.01) beside kl_in_reward: true stays a default."""
    from hfsdk.core.config import load_run_config
    from hfsdk_backend_common.objectives import unused_kl_loss

    config = load_run_config("ppo", None, ["algorithm.kl_loss_coef=0.05"])
    assert (unused_kl_loss(config) or "").startswith("algorithm.kl_loss_coef=0.05 has no effect")
    config = load_run_config("grpo", None, ["algorithm.kl_in_reward=true"])
    assert config.algorithm.kl_loss_coef == 0.01 and unused_kl_loss(config) is None
    config = load_run_config(
        "ppo", None, ["algorithm.kl_in_reward=false", "algorithm.kl_loss_coef=0.05"]
    )
    assert unused_kl_loss(config) is None
    assert "unused_kl_loss" in get_registry("preflight_checks")


def test_losses_registered_without_a_config_class_get_config_none() -> None:
    """config_cls is optional: such a loss has no ``policy_loss``/``value_loss`` section."""
    import hfsdk
    from hfsdk.core.config import load_run_config
    from hfsdk.core.plugin_manager import get_plugin_manager
    from hfsdk_backend_common.objectives import actor_objective_from, critic_objective_from

    def plain(**unused: Any) -> Any:
        raise AssertionError("not called here")

    class Plain:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_policy_losses(register):  # type: ignore[no-untyped-def]
            register("plain_loss", plain)

        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_value_losses(register):  # type: ignore[no-untyped-def]
            register("plain_value", plain)

    hfsdk.reset_plugin_manager()  # registries fill lazily: add the plugin before they do
    get_plugin_manager().pm.register(Plain, name="plain")
    try:
        changes = ["algorithm.policy_loss=plain_loss", "algorithm.value_loss=plain_value"]
        config = load_run_config("ppo", None, changes)
        terms = get_registry("algorithms")["ppo"].impl.actor_objective(config.algorithm)
        # Before: AttributeError: run config has no section 'policy_loss'
        assert actor_objective_from(config, terms).policy_loss_config is None
        assert critic_objective_from(config).value_loss_config is None
    finally:
        hfsdk.reset_plugin_manager()
