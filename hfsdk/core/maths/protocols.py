"""The call contracts of registered maths: estimators, losses and KL estimators.

Registries hold plain callables; these :class:`typing.Protocol` types say what
each kind of callable takes and returns, so a plugin author (and a type
checker) can check an implementation against them. ``docs/plugin_hooks.md``
documents the same contracts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    import torch

    from hfsdk.core.maths.aggregation import LossAggregation


@attrs.frozen(kw_only=True)
class AdvantageResult:
    """What an advantage estimator returns.

    ``advantages`` and ``returns`` are (B, T), zero where masked; ``extras``
    names anything else the estimator computed that a program may use (e.g.
    Safe-RLHF's ``cost_returns`` for the cost critic).
    """

    advantages: torch.Tensor
    returns: torch.Tensor
    extras: Mapping[str, torch.Tensor] = attrs.field(
        factory=dict, converter=lambda d: MappingProxyType(dict(d))
    )

    def __iter__(self) -> Iterator[torch.Tensor]:
        """``advantages, returns = result`` (the extras are read by name)."""
        return iter((self.advantages, self.returns))


class AdvantageEstimator(Protocol):
    """``fn(*, token_level_rewards, response_mask, config, **inputs) -> AdvantageResult``.

    ``token_level_rewards`` and ``response_mask`` are (B, T); the program
    always passes ``group_index`` (one id per sample, equal within a prompt's
    group) and ``values`` when the batch holds them, plus whatever the
    estimator documents (``reward_baselines``, ``token_level_costs``, ...).
    Unused inputs must be accepted and ignored (``**unused``).
    """

    def __call__(
        self,
        *,
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        config: Any = None,
        group_index: Sequence[Any] | None = None,
        values: torch.Tensor | None = None,
        **inputs: Any,
    ) -> AdvantageResult: ...


class PolicyLoss(Protocol):
    """``fn(*, log_prob, old_log_prob, advantages, response_mask, config, aggregation)``.

    All tensors (B, T). Returns ``(loss, metrics)``: the scalar loss, aggregated
    with ``aggregation`` (:class:`~hfsdk.core.maths.aggregation.LossAggregation`),
    and a dict of floats with at least ``pg_clipfrac`` and ``ppo_kl``.
    """

    def __call__(
        self,
        *,
        log_prob: torch.Tensor,
        old_log_prob: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        config: Any = None,
        aggregation: LossAggregation | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]: ...


class ValueLoss(Protocol):
    """``fn(*, values, old_values, returns, response_mask, config, aggregation)``.

    ``values`` are the critic's new predictions, ``old_values`` those of the
    rollout; returns ``(loss, metrics)``.
    """

    def __call__(
        self,
        *,
        values: torch.Tensor,
        old_values: torch.Tensor,
        returns: torch.Tensor,
        response_mask: torch.Tensor,
        config: Any = None,
        aggregation: LossAggregation | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]: ...


class KLEstimator(Protocol):
    """``fn(log_prob, ref_log_prob) -> per-token KL`` (same shape, no masking)."""

    def __call__(self, log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor: ...
