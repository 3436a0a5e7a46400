"""Rollout corrections, the contract: what a correction returns and how a run's list composes.

The rollout samples with a behaviour policy ``μ`` (its ``rollout_log_probs``),
the loss's ratio is taken against ``π_old`` (the training engine's
``old_log_probs``). A correction (a ``rollout_corrections`` registry entry,
``hfsdk_register_rollout_corrections``) returns a :class:`CorrectionResult`: a
detached, non-negative per-token **weight** and a boolean **keep** mask. The
actor applies them to the policy loss as a loss weight
(``LossAggregation.token_weights``) and by dropping ``keep == False`` tokens from
the mask the loss sees, never by scaling advantages, so every registered policy
loss takes them unchanged. Corrections compose: the weights of a list multiply,
the keep masks intersect (:func:`combine_corrections`).

The standard corrections themselves are in :mod:`hfsdk_rollout_corrections.corrections`
(``hfsdk list rollout-corrections``); the backends' shared actor loss
(``hfsdk_backend_common.objectives``) calls :func:`combine_corrections`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import torch

from hfsdk import HfsdkError, as_bool_mask, check_token_tensors, masked_fill_zero
from hfsdk_rollout_corrections.mismatch import non_finite_log_probs

LOG_RATIO_CLAMP = 20.0
"""Bound on a log ratio before ``exp`` (a sequence-level sum could overflow)."""


@attrs.frozen(kw_only=True)
class CorrectionResult:
    """What one correction (or a composed list) does to the policy loss.

    ``weights`` (B, T): detached, ≥ 0, 1 where it does not reweight; ``keep`` (B, T)
    bool: the tokens left in the loss (a subset of the response mask);
    ``metrics``: named without prefix (the actor prefixes ``actor/``), each a float (a share
    or mean over the valid tokens) or a ``(value, units)`` pair (a mean over ``units`` of
    its own: kept tokens, sequences), so the actor weights it by what it is a mean of.
    """

    weights: torch.Tensor
    keep: torch.Tensor
    metrics: Mapping[str, float | tuple[float, float]] = attrs.field(factory=dict)


class RolloutCorrection(Protocol):
    """``fn(*, old_log_prob, rollout_log_prob, log_prob, advantages, response_mask, config)``.

    All tensors (B, T) and detached; ``log_prob`` is the policy being trained
    (π_θ, before this micro-batch's step). Returns a :class:`CorrectionResult`.
    """

    def __call__(
        self,
        *,
        old_log_prob: torch.Tensor,
        rollout_log_prob: torch.Tensor,
        log_prob: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        config: Any = None,
    ) -> CorrectionResult: ...


def _ratio_stats(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    """``ρ`` before any correction: its max over valid tokens."""
    log_ratio = old_log_prob.detach().float() - rollout_log_prob.detach().float()
    ratio = torch.exp(masked_fill_zero(log_ratio, mask).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    return {"is_ratio_max": float(ratio[mask].max()) if bool(mask.any()) else 0.0}


def _check_result(name: str, result: CorrectionResult, mask: torch.Tensor) -> None:
    """Raise :class:`HfsdkError` unless ``result`` keeps the contract: ``weights`` and
    ``keep`` (B, T) tensors, the weights finite and ≥ 0 on the tokens it keeps (a (B,)
    weight would broadcast silently when B == T, a NaN or negative one reach the loss)."""
    for field in ("weights", "keep"):
        tensor = getattr(result, field)
        if not isinstance(tensor, torch.Tensor) or tensor.shape != mask.shape:
            is_tensor = isinstance(tensor, torch.Tensor)
            got = f"of shape {tuple(tensor.shape)}" if is_tensor else f"as {type(tensor).__name__}"
            raise HfsdkError(
                f"rollout correction {name!r} returned {field} {got}; expected a (B, T) "
                f"tensor of shape {tuple(mask.shape)} like response_mask (repeat a "
                "per-sequence value on every token of its row)"
            )
    # One reduction over the tokens the correction keeps: a token it drops (keep=False) or
    # padding never reaches the loss, so its weight may be anything. NaN fails `>= 0`.
    weights = result.weights.detach()
    bad = mask & result.keep.bool() & ~(torch.isfinite(weights) & (weights >= 0))
    if bool(bad.any()):
        raise HfsdkError(
            f"rollout correction {name!r} returned weight {float(weights[bad][0])} on a kept "
            "response token; expected finite weights >= 0 (to drop a token, set keep=False)"
        )


_SOURCES = {
    "old_log_probs": "the training engine's log-probs of the sampled tokens (its dtype, a "
    "logit overflow)",
    "rollout_log_probs": "the rollout backend's log-probs (-inf: a sampled token its own "
    "sampling settings give probability 0) and that response_mask covers only the tokens it "
    "returned",
}


def _check_inputs_finite(
    mask: torch.Tensor, old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor
) -> None:
    """Raise :class:`HfsdkError` naming the input, when a log-prob is NaN or ±inf on a valid
    token: the corrections would turn it into a NaN weight and be blamed for it. Padding may
    hold anything (it never reaches the loss)."""
    # One reduction (one device sync) on the usual path; which input only when one is bad.
    finite = torch.isfinite(old_log_prob.detach()) & torch.isfinite(rollout_log_prob.detach())
    if not bool((mask & ~finite).any()):
        return
    key = non_finite_log_probs(old_log_prob.detach(), rollout_log_prob.detach(), mask)[0]
    values = old_log_prob if key == "old_log_probs" else rollout_log_prob
    bad = mask & ~torch.isfinite(values.detach())
    rows = bad.any(dim=-1).nonzero().flatten().tolist()
    row, token = (int(i) for i in bad.nonzero()[0])
    count = int(bad.sum())
    raise HfsdkError(
        f"{key} is non-finite on {count} valid token{'s' if count > 1 else ''} in "
        f"{len(rows)} row{'s' if len(rows) > 1 else ''} (first: row {row}, token {token}, "
        f"value {float(values[row, token])}); expected finite log-probs on every "
        f"response_mask token before a rollout correction; check {_SOURCES[key]}"
    )


def combine_corrections(
    corrections: Sequence[tuple[str, Callable[..., CorrectionResult], Any]],
    *,
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
) -> CorrectionResult:
    """Apply ``(name, fn, config)`` corrections together: weights multiply, keep masks intersect.

    Adds ``is_kept_share`` (valid tokens left in the loss), ``is_weight_mean`` (over the
    kept tokens: ``(mean, kept tokens)``), ``is_weight_max`` (over the kept tokens) and
    ``is_ratio_max`` (ρ before correction). Raises :class:`HfsdkError` naming
    ``old_log_probs`` or ``rollout_log_probs`` when one is NaN or ±inf on a valid token.
    """
    check_token_tensors(
        response_mask,
        old_log_prob=old_log_prob,
        rollout_log_prob=rollout_log_prob,
        log_prob=log_prob,
        advantages=advantages,
    )
    mask = as_bool_mask(response_mask)
    _check_inputs_finite(mask, old_log_prob, rollout_log_prob)
    weights = mask.float()
    keep = mask.clone()
    metrics: dict[str, float | tuple[float, float]] = {}
    with torch.no_grad():
        for name, fn, config in corrections:
            result = fn(
                old_log_prob=old_log_prob,
                rollout_log_prob=rollout_log_prob,
                log_prob=log_prob,
                advantages=advantages,
                response_mask=mask,
                config=config,
            )
            if not isinstance(result, CorrectionResult):
                raise TypeError(
                    f"rollout correction {name!r} returned {type(result).__name__}; expected "
                    "hfsdk_rollout_corrections.CorrectionResult(weights=, keep=, metrics=)"
                )
            _check_result(name, result, mask)
            weights = weights * result.weights.detach().float()
            keep = keep & result.keep.bool()
            metrics.update(result.metrics)
        weights = masked_fill_zero(weights, keep)
        n = int(mask.sum())
        kept = int(keep.sum())
        metrics["is_kept_share"] = kept / n if n else 0.0
        # Over the kept tokens: a (mean, units) pair, so the actor weights it by them.
        metrics["is_weight_mean"] = (float(weights[keep].mean()) if kept else 0.0, float(kept))
        metrics["is_weight_max"] = float(weights[keep].max()) if kept else 0.0
        metrics.update(_ratio_stats(old_log_prob, rollout_log_prob, mask))
    return CorrectionResult(weights=weights, keep=keep, metrics=metrics)
