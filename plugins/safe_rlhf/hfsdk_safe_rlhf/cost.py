"""The cost signal of Safe-RLHF: the cost model's score plus the KL penalty.

The reward is penalised by the KL (``r − β·KL``); the cost carries it with
the opposite sign (``c + β·KL``), so drifting from the reference policy is
both less rewarding and more costly (Dai et al., 2023). The paper splits the
coefficient between the two signals (β/2 each): pass ``kl_coef = β/2`` to both
:func:`hfsdk.core.maths.kl.apply_kl_penalty` and :func:`apply_kl_to_costs` to
reproduce it.
"""

from __future__ import annotations

import torch

from hfsdk import KLEstimator, check_token_tensors, masked_fill_zero, masked_mean, token_kl


def apply_kl_to_costs(
    token_level_costs: torch.Tensor,
    log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    kl_coef: float,
    estimator: str | KLEstimator = "k1",
) -> tuple[torch.Tensor, dict[str, float]]:
    """``costs + kl_coef · KL`` per token (0 where masked) and metrics ``cost_kl``, ``kl_coef``."""
    check_token_tensors(response_mask, token_level_costs=token_level_costs)
    kl = token_kl(log_prob, ref_log_prob, response_mask, estimator)
    costs = masked_fill_zero(token_level_costs + kl_coef * kl, response_mask)
    metrics = {
        "cost_kl": float(masked_mean(kl, response_mask, dim=-1).mean().item()),
        "kl_coef": float(kl_coef),
    }
    return costs, metrics
