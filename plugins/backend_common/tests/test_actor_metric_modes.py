"""``actor/entropy`` and ``actor/kl`` are per-token means whatever ``loss_agg_mode`` the loss uses.

``actor/entropy`` was aggregated with the loss's own mode: it read ~3x the per-token mean
under ``seq-mean-token-sum`` and far below it under Dr.GRPO's ``seq-mean-token-sum-norm``,
so a Dr.GRPO run looked as if its entropy had collapsed.
"""

from __future__ import annotations

import pytest
import torch

from hfsdk import LOSS_AGG_MODES, Batch, LossAggregation, LossCounts, masked_mean
from hfsdk_backend_common.engine_support import MetricAccumulator
from hfsdk_backend_common.objectives import ActorObjective, actor_micro_loss
from hfsdk_policy_losses.losses import ppo_clip_loss


def _tensors() -> dict[str, torch.Tensor]:
    # Rows of different lengths, a hole and an empty row; 99s under the mask must not count.
    mask = torch.tensor(
        [[1, 1, 1, 1, 1, 1], [1, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]],
        dtype=torch.float32,
    )
    entropy = torch.tensor(
        [
            [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
            [4.0, 3.0, 99.0, 2.0, 99.0, 99.0],
            [0.25, 99.0, 99.0, 99.0, 99.0, 99.0],
            [99.0] * 6,
        ]
    )
    return {
        "response_mask": mask,
        "old_log_probs": torch.zeros(4, 6),
        "advantages": torch.ones(4, 6),
        "entropy": entropy,
    }


def _reported(mode: str, tensors: dict[str, torch.Tensor], entropy_coef: float) -> float:
    """``actor/entropy`` over two micro-batches of one mini-batch, as the engines run it."""
    mask = tensors["response_mask"]
    counts = LossCounts(tokens=float(mask.sum()), sequences=float(mask.any(dim=-1).sum()))
    objective = ActorObjective(
        policy_loss=ppo_clip_loss, loss_agg_mode=mode, entropy_coef=entropy_coef, norm_length=8.0
    )
    aggregation = LossAggregation.from_counts(mode, counts, norm_length=8.0)
    metrics = MetricAccumulator(1)
    for rows in ([0, 1], [2, 3]):
        micro = Batch.from_dict(tensors={k: v[rows] for k, v in tensors.items()})
        log_prob = torch.zeros(len(rows), 6, requires_grad=True)
        actor_micro_loss(
            objective, micro, log_prob, tensors["entropy"][rows], aggregation=aggregation,
            counts=counts, has_reference=False, metrics=metrics,
        )  # fmt: skip
    metrics.end_minibatch()
    return metrics.result()["actor/entropy"]


@pytest.mark.parametrize("entropy_coef", [0.0, 0.1])
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_actor_entropy_is_the_per_token_mean_whatever_the_loss_agg_mode(
    mode: str, entropy_coef: float
) -> None:
    tensors = _tensors()
    expected = float(masked_mean(tensors["entropy"], tensors["response_mask"]))
    assert _reported(mode, tensors, entropy_coef) == pytest.approx(expected, rel=1e-6)
