"""The ``batch_mean`` advantage estimator: sequence score minus the batch's mean score.

With ``s_i`` the summed token rewards of response ``i`` and ``s̄`` their mean
over the batch, every valid token of response ``i`` gets ``A_i = s_i − s̄``
(optionally divided by the batch's score std); returns equal advantages.
"""

from __future__ import annotations

import attrs
import torch

from hfsdk import AdvantageResult, check_token_tensors, help_field, masked_fill_zero


@attrs.frozen(kw_only=True)
class BatchMeanConfig:
    """Settings of the ``batch_mean`` estimator."""

    scale_by_std: bool = help_field(
        "Divide the centred scores by the batch's score std (plus epsilon).", default=False
    )
    epsilon: float = help_field(
        "Added to the std before dividing.", default=1e-6, validator=attrs.validators.gt(0.0)
    )


def compute_batch_mean_advantages(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: BatchMeanConfig | None = None,
    **unused: object,
) -> AdvantageResult:
    """``A_i = s_i − mean(s)`` on every valid token; ``extras['baseline']`` holds the mean."""
    config = config or BatchMeanConfig()
    check_token_tensors(response_mask, token_level_rewards=token_level_rewards)
    with torch.no_grad():
        scores = masked_fill_zero(token_level_rewards, response_mask).sum(dim=-1)
        baseline = scores.mean()
        centred = scores - baseline
        if config.scale_by_std and len(scores) > 1:
            centred = centred / (scores.std() + config.epsilon)
        advantages = masked_fill_zero(
            centred[:, None].expand_as(token_level_rewards), response_mask
        )
    return AdvantageResult(
        advantages=advantages, returns=advantages.clone(), extras={"baseline": baseline}
    )
