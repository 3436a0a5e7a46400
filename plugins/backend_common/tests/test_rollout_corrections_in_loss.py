"""Rollout corrections in the actor's loss: a loss weight and a mask, for every policy loss."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk import (
    Batch,
    HfsdkError,
    LossAggregation,
    LossCounts,
    aggregate_loss,
    get_registry,
    masked_whiten,
)
from hfsdk_backend_common.engine_support import MetricAccumulator
from hfsdk_backend_common.objectives import ActorObjective, actor_micro_loss
from hfsdk_policy_losses.losses import PPOClipConfig, ppo_clip_loss
from hfsdk_rollout_corrections.contract import CorrectionResult
from hfsdk_rollout_corrections.corrections import (
    BandConfig,
    MISConfig,
    TISConfig,
    icepop,
    mis,
    tis,
)

# δ = old − rollout: row 0: 0.5, −1.0, 0.0; row 1: 1.0, 0.0 (3 and 2 valid tokens)
OLD = torch.tensor([[-1.0, -2.0, -0.5, 0.0], [-1.0, -1.0, 0.0, 0.0]])
ROLLOUT = torch.tensor([[-1.5, -1.0, -0.5, -9.0], [-2.0, -1.0, -9.0, -9.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
COUNTS = LossCounts(tokens=5.0, sequences=2.0)
E = math.e


def _micro(advantages: torch.Tensor | None = None, with_rollout: bool = True) -> Batch:
    tensors = {
        "response_mask": MASK,
        "old_log_probs": OLD,
        "advantages": torch.ones(2, 4) if advantages is None else advantages,
    }
    if with_rollout:
        tensors["rollout_log_probs"] = ROLLOUT
    return Batch.from_dict(tensors=tensors)


def _loss(objective, micro, log_prob=None, mode="token-mean"):
    metrics = MetricAccumulator()
    log_prob = OLD.clone() if log_prob is None else log_prob
    loss = actor_micro_loss(
        objective,
        micro,
        log_prob,
        torch.zeros(2, 4),
        aggregation=LossAggregation.from_counts(mode, COUNTS),
        counts=COUNTS,
        has_reference=False,
        metrics=metrics,
    )
    metrics.end_minibatch()
    return loss, metrics.result()


def test_mis_in_the_actor_loss_equals_a_hand_computation() -> None:
    plain, _ = _loss(ActorObjective(policy_loss=ppo_clip_loss), _micro())
    assert float(plain) == pytest.approx(-1.0)
    objective = ActorObjective(
        policy_loss=ppo_clip_loss, corrections=[("mis", mis, MISConfig(cap=2.0))]
    )
    corrected, metrics = _loss(objective, _micro())
    # log π = log π_old: ratio 1, so the loss is −Σ w·A / 5 over the 5 valid tokens.
    assert float(corrected) == pytest.approx(-(E**0.5 + E**-1 + 1.0 + 0.0 + 1.0) / 5)
    assert metrics["actor/is_weight_max"] == pytest.approx(E**0.5)
    assert metrics["actor/mis_masked_share"] == pytest.approx(0.2)
    assert metrics["actor/is_kept_share"] == pytest.approx(0.8)


def test_weighted_ppo_clip_equals_a_hand_computation() -> None:
    log_prob = torch.tensor([[-0.5, -2.0, -0.6, 0.0], [-1.2, -0.9, 0.0, 0.0]])
    adv = torch.tensor([[1.0, 1.0, 1.0, 0.0], [-1.0, -1.0, 0.0, 0.0]])
    objective = ActorObjective(
        policy_loss=ppo_clip_loss,
        policy_loss_config=PPOClipConfig(clip_ratio_c=None),
        corrections=[("tis", tis, TISConfig(cap=2.0))],
    )
    loss, _ = _loss(objective, _micro(adv), log_prob)
    total = 0.0
    w = [[E**0.5, E**-1, 1.0], [2.0, 1.0]]
    for i, n in enumerate((3, 2)):
        for t in range(n):
            rho = math.exp(float(log_prob[i, t] - OLD[i, t]))
            a = float(adv[i, t])
            total += w[i][t] * max(-a * rho, -a * min(max(rho, 0.8), 1.2))
    assert float(loss) == pytest.approx(total / 5, rel=1e-6)


def test_pg_clipfrac_counts_only_the_tokens_kept() -> None:
    # IcePop drops row 0 token 1 and row 1 token 0; of the 3 kept tokens one is clipped.
    log_prob = OLD.clone()
    log_prob[0, 0] += 1.0  # ratio e > 1.2 with A > 0: clipped
    objective = ActorObjective(
        policy_loss=ppo_clip_loss, corrections=[("icepop", icepop, BandConfig(c=2.0))]
    )
    _, metrics = _loss(objective, _micro(), log_prob)
    # One micro-batch: the mean over its kept tokens (1 of 3), not over all 5 (1 of 5).
    assert metrics["actor/pg_clipfrac"] == pytest.approx(1 / 3)


def _halving(*, response_mask, **_):
    mask = response_mask.bool()
    return CorrectionResult(weights=mask.float() * 0.5, keep=mask, metrics={})


def _normalising_loss(
    *, log_prob, old_log_prob, advantages, response_mask, config=None, aggregation=None
):
    """A plugin loss that whitens its advantages (scaling them by a weight would be undone)."""
    adv = masked_whiten(advantages, response_mask)
    ratio = torch.exp(log_prob - old_log_prob)
    return aggregate_loss(-adv * ratio, response_mask, aggregation), {
        "pg_clipfrac": 0.0,
        "ppo_kl": 0.0,
    }


def test_a_loss_that_normalises_advantages_keeps_the_weight() -> None:
    adv = torch.tensor([[1.0, -2.0, 0.5, 0.0], [3.0, -1.0, 0.0, 0.0]])
    log_prob = OLD + 0.1 * torch.arange(8.0).reshape(2, 4)
    plain, _ = _loss(ActorObjective(policy_loss=_normalising_loss), _micro(adv), log_prob)
    halved, _ = _loss(
        ActorObjective(policy_loss=_normalising_loss, corrections=[("half", _halving, None)]),
        _micro(adv),
        log_prob,
    )
    assert float(plain) != pytest.approx(0.0, abs=1e-3)
    assert float(halved) == pytest.approx(0.5 * float(plain), rel=1e-6)


# DPO's pairwise loss trains on given (chosen, rejected) pairs: nothing was sampled, so no
# rollout correction can reach it (one without rollout log-probs is refused, tested below),
# and its loss is not additive over tokens.
PAIRWISE_LOSSES = {"dpo"}
POLICY_LOSSES = sorted(set(get_registry("policy_losses")) - PAIRWISE_LOSSES)


@pytest.mark.parametrize("name", POLICY_LOSSES)
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"])
def test_every_registered_loss_takes_weights_and_masks(name: str, mode: str) -> None:
    entry = get_registry("policy_losses")[name]
    config = entry.make_config()
    adv = torch.tensor([[1.0, -2.0, 0.5, 0.0], [3.0, -1.0, 0.0, 0.0]])
    # Near ratio 1, inside every loss's clip range (GSPO's is ~3e-4), so kept tokens get gradient.
    log_prob = (OLD + 1e-5 * torch.arange(8.0).reshape(2, 4)).requires_grad_(True)

    def run(corrections):
        objective = ActorObjective(
            policy_loss=entry.impl, policy_loss_config=config, corrections=corrections
        )
        return _loss(objective, _micro(adv), log_prob, mode)[0]

    plain = run([])
    halved = run([("half", _halving, None)])
    assert float(halved.detach()) == pytest.approx(0.5 * float(plain.detach()), rel=1e-5)
    # IcePop drops row 0 token 1 and row 1 token 0: no gradient reaches them.
    masked = run([("icepop", icepop, BandConfig(c=2.0))])
    (grad,) = torch.autograd.grad(masked, log_prob)
    assert float(grad[0, 1]) == 0.0 and float(grad[1, 0]) == 0.0
    assert float(grad[0, 0]) != 0.0


def test_a_correction_without_rollout_log_probs_is_refused() -> None:
    objective = ActorObjective(policy_loss=ppo_clip_loss, corrections=[("tis", tis, TISConfig())])
    with pytest.raises(HfsdkError, match="rollout_log_probs"):
        _loss(objective, _micro(with_rollout=False))


def test_max_metrics_keep_their_maximum_over_micro_batches() -> None:
    metrics = MetricAccumulator()
    for value in (1.5, 3.0, 2.0):
        metrics.add_max("actor/is_weight_max", value)
        metrics.end_minibatch()
    assert metrics.result()["actor/is_weight_max"] == 3.0


@pytest.mark.parametrize(
    ("overrides", "width"),
    [
        (["rollout.max_response_length=6"], 6.0),
        (
            [
                "rollout.max_response_length=6",
                "rollout.multi_turn.tools=[add]",
                "rollout.multi_turn.max_response_tokens=40",
            ],
            40.0,
        ),
    ],
)
def test_norm_length_is_the_width_of_the_responses(overrides: list[str], width: float) -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk_backend_common.objectives import actor_objective_from, critic_objective_from

    config = load_run_config("ppo", None, overrides)
    terms = get_registry("algorithms")["ppo"].impl.actor_objective(config.algorithm)
    assert actor_objective_from(config, terms).norm_length == width
    assert critic_objective_from(config).norm_length == width


def test_the_kl_estimator_is_resolved_once_when_the_objective_is_built() -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk_backend_common.objectives import actor_objective_from

    config = load_run_config("grpo", None, ["algorithm.kl_estimator=k3"])
    terms = get_registry("algorithms")["grpo"].impl.actor_objective(config.algorithm)
    objective = actor_objective_from(config, terms)
    # The registered function itself, not its name: no registry lookup per micro-batch.
    assert objective.kl_estimator is get_registry("kl_estimators")["k3"].impl
