"""Truncated and masked importance sampling against a hand computation."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk import Batch, HfsdkError, LossAggregation, LossCounts
from hfsdk.core.maths.policy_losses import PPOClipConfig, ppo_clip_loss
from hfsdk_backend_common.engine_support import MetricAccumulator
from hfsdk_backend_common.objectives import ActorObjective, actor_micro_loss
from hfsdk_backend_common.off_policy import (
    OffPolicyCorrection,
    importance_weights,
    weighted_advantages,
)

# Two sequences: 3 and 2 valid tokens. Token log ratios old − rollout:
# row 0: 0.5, −1.0, 0.0 ; row 1: 1.0, 0.0
OLD = torch.tensor([[-1.0, -2.0, -0.5, 0.0], [-1.0, -1.0, 0.0, 0.0]])
ROLLOUT = torch.tensor([[-1.5, -1.0, -0.5, -9.0], [-2.0, -1.0, -9.0, -9.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
E = math.e


def _weights(correction: str, level: str, cap: float = 2.0):
    return importance_weights(
        old_log_prob=OLD,
        rollout_log_prob=ROLLOUT,
        response_mask=MASK,
        correction=OffPolicyCorrection(correction=correction, level=level, cap=cap),
    )


def _expected(rows: list[list[float]]) -> torch.Tensor:
    out = torch.zeros(2, 4)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


CASES = {
    # (correction, level): (weights per valid token, share over the cap)
    ("tis", "token"): ([[E**0.5, E**-1, 1.0], [2.0, 1.0]], 1 / 5),
    ("mis", "token"): ([[E**0.5, E**-1, 1.0], [0.0, 1.0]], 1 / 5),
    # sequence ratios: row 0 exp(−0.5), row 1 exp(1) > 2
    ("tis", "sequence"): ([[E**-0.5] * 3, [2.0, 2.0]], 2 / 5),
    ("mis", "sequence"): ([[E**-0.5] * 3, [0.0, 0.0]], 2 / 5),
}


@pytest.mark.parametrize(("correction", "level"), list(CASES))
def test_weights_and_metrics_equal_a_hand_computation(correction: str, level: str) -> None:
    rows, share = CASES[(correction, level)]
    weights, metrics = _weights(correction, level)
    expected = _expected(rows)
    torch.testing.assert_close(weights, expected)
    flat = [w for row in rows for w in row]
    assert metrics["is_weight_mean"] == pytest.approx(sum(flat) / 5)
    assert metrics["is_weight_max"] == pytest.approx(max(flat))
    assert metrics["is_ratio_max"] == pytest.approx(E)  # row 1: e¹ per token and per sequence
    name = "is_truncated_share" if correction == "tis" else "is_masked_share"
    assert metrics[name] == pytest.approx(share)


def test_the_cap_is_configurable() -> None:
    weights, metrics = _weights("tis", "token", cap=1.5)
    torch.testing.assert_close(weights, _expected([[1.5, E**-1, 1.0], [1.5, 1.0]]))
    assert metrics["is_truncated_share"] == pytest.approx(2 / 5)


def test_weighted_ppo_clip_loss_equals_a_hand_computation() -> None:
    """Each token's clipped surrogate times its truncated weight, token-mean over 5 tokens."""
    log_prob = torch.tensor([[-0.5, -2.0, -0.6, 0.0], [-1.2, -0.9, 0.0, 0.0]])
    adv = torch.tensor([[1.0, 1.0, 1.0, 0.0], [-1.0, -1.0, 0.0, 0.0]])
    weights, _ = _weights("tis", "token")
    loss, _ = ppo_clip_loss(
        log_prob=log_prob,
        old_log_prob=OLD,
        advantages=weighted_advantages(adv, weights),
        response_mask=MASK,
        config=PPOClipConfig(clip_ratio_c=None),
    )
    total = 0.0
    w = [[E**0.5, E**-1, 1.0], [2.0, 1.0]]
    for i, n in enumerate((3, 2)):
        for t in range(n):
            rho = math.exp(float(log_prob[i, t] - OLD[i, t]))
            a = float(adv[i, t])
            total += w[i][t] * max(-a * rho, -a * min(max(rho, 0.8), 1.2))
    assert float(loss) == pytest.approx(total / 5, rel=1e-6)


def _micro(with_rollout: bool = True) -> Batch:
    tensors = {
        "response_mask": MASK,
        "old_log_probs": OLD,
        "advantages": torch.ones(2, 4),
    }
    if with_rollout:
        tensors["rollout_log_probs"] = ROLLOUT
    return Batch.from_dict(tensors=tensors)


def _micro_loss(objective: ActorObjective, micro: Batch) -> tuple[float, dict[str, float]]:
    metrics = MetricAccumulator()
    counts = LossCounts(tokens=5.0, sequences=2.0)
    loss = actor_micro_loss(
        objective,
        micro,
        OLD.clone(),  # log π = log π_old: ratio 1, the loss is −mean(w·A)
        torch.zeros(2, 4),
        aggregation=LossAggregation.from_counts("token-mean", counts),
        counts=counts,
        has_reference=False,
        metrics=metrics,
    )
    metrics.end_minibatch()
    return float(loss), metrics.result()


def test_actor_loss_applies_the_configured_correction() -> None:
    plain, _ = _micro_loss(ActorObjective(policy_loss=ppo_clip_loss), _micro())
    assert plain == pytest.approx(-1.0)
    objective = ActorObjective(
        policy_loss=ppo_clip_loss,
        off_policy=OffPolicyCorrection(correction="mis", level="token", cap=2.0),
    )
    corrected, metrics = _micro_loss(objective, _micro())
    assert corrected == pytest.approx(-(E**0.5 + E**-1 + 1.0 + 0.0 + 1.0) / 5)
    assert metrics["actor/is_weight_mean"] == pytest.approx(-corrected)
    assert metrics["actor/is_weight_max"] == pytest.approx(E**0.5)
    assert metrics["actor/is_masked_share"] == pytest.approx(0.2)


def test_a_correction_without_rollout_log_probs_is_refused() -> None:
    objective = ActorObjective(
        policy_loss=ppo_clip_loss, off_policy=OffPolicyCorrection(correction="tis")
    )
    with pytest.raises(HfsdkError, match="rollout_log_probs"):
        _micro_loss(objective, _micro(with_rollout=False))


def test_max_metrics_keep_their_maximum_over_micro_batches() -> None:
    metrics = MetricAccumulator()
    for value in (1.5, 3.0, 2.0):
        metrics.add_max("actor/is_weight_max", value)
        metrics.end_minibatch()
    assert metrics.result()["actor/is_weight_max"] == 3.0
