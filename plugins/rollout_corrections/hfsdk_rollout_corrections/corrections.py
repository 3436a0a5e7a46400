"""The standard rollout corrections: weights and masks for tokens another policy sampled.

The rollout samples with a behaviour policy ``μ`` (its ``rollout_log_probs``),
the loss's ratio is taken against ``π_old`` (the training engine's
``old_log_probs``). With ``δ_t = log π_old(y_t) − log μ(y_t)`` and
``ρ_t = exp(δ_t)``, every correction returns a
:class:`~hfsdk_rollout_corrections.contract.CorrectionResult`: a detached,
non-negative per-token **weight** and a boolean **keep** mask
(:func:`~hfsdk_rollout_corrections.contract.combine_corrections` composes a run's
list and the actor's loss applies it).

Registered corrections (``hfsdk list rollout-corrections``):

- ``tis`` — truncated IS (Yao et al., 2025): weight ``min(ρ, cap)``, token or
  sequence level (``ρ_seq = exp(Σ_t δ_t)``).
- ``mis`` — masked IS (Liu et al., 2025): weight ``ρ`` where ``ρ ≤ cap``; tokens
  (or whole sequences) above the cap are dropped.
- ``icepop`` — IcePop (Ling team, Ring-1T, arXiv 2510.18855): weight ``M(ρ_t) = ρ_t`` for
  ``ρ_t ∈ [1/c, c]``; tokens outside the band are dropped (weight 0).
- ``geo_rs`` — geometric-mean sequence rejection: a sequence whose
  ``exp(mean_t δ_t) ∉ [1/c, c]`` is dropped (length-independent, unlike ``ρ_seq``).
- ``k3_rs`` — K3 sequence rejection: a sequence whose mean per-token K3
  estimate ``ρ_t − 1 − δ_t`` of KL(μ‖π_old) exceeds ``threshold`` is dropped.
- ``trust_region`` — trust-region masking: a sequence any of whose tokens has
  ``|δ_t| > delta`` is dropped (its sequence-level divergence is bounded by the worst
  token's, so one far-off token voids the whole sequence's gradient).
- ``dsv32_mask`` — DeepSeek-V3.2's off-policy sequence masking: a sequence with a
  negative advantage whose mean ``log μ − log π_θ`` (the current policy's log-probs,
  i.e. KL(μ‖π_θ) estimated on μ's samples) exceeds ``delta`` is dropped.

Each also reports what it did as metrics (``*_share`` over valid tokens, or over
sequences for the sequence-level ones: a ``(share, sequences)`` pair).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal

import attrs
import torch

from hfsdk import as_bool_mask, help_field, masked_fill_zero
from hfsdk_rollout_corrections.contract import LOG_RATIO_CLAMP, CorrectionResult


def _positive(_instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not value > 0:
        raise ValueError(f"'{attribute.name}' must be > 0, got {value!r}")


def _above_one(_instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not value > 1.0:
        raise ValueError(
            f"'{attribute.name}' must be > 1 for the band [1/c, c] (e.g. 2 for IcePop, "
            f"1.01 for geo_rs), got {value!r}"
        )


Level = Literal["token", "sequence"]


@attrs.frozen(kw_only=True)
class TISConfig:
    """Settings of ``tis`` (truncated importance sampling)."""

    cap: float = help_field(
        "The IS ratio is truncated at this value.", default=2.0, validator=_positive
    )
    level: Level = help_field(
        "token: ρ_t per token; sequence: ρ_seq = Π_t ρ_t for every token of the sequence.",
        default="token",
        validator=attrs.validators.in_(("token", "sequence")),
    )


@attrs.frozen(kw_only=True)
class MISConfig:
    """Settings of ``mis`` (masked importance sampling)."""

    cap: float = help_field(
        "Tokens (or sequences) whose ratio exceeds this are dropped.",
        default=2.0,
        validator=_positive,
    )
    level: Level = help_field(
        "token: mask per token; sequence: mask the whole sequence on ρ_seq = Π_t ρ_t.",
        default="token",
        validator=attrs.validators.in_(("token", "sequence")),
    )


@attrs.frozen(kw_only=True)
class BandConfig:
    """Settings of a band correction: ratios outside ``[1/c, c]`` are dropped, the others
    weighted by their ratio."""

    c: float = help_field(
        "The band's upper bound c > 1 (the lower is 1/c).", default=2.0, validator=_above_one
    )


@attrs.frozen(kw_only=True)
class GeoRSConfig:
    """Settings of ``geo_rs`` (geometric-mean sequence rejection)."""

    c: float = help_field(
        "A sequence whose geometric-mean ratio exp(mean_t log ρ_t) leaves [1/c, c] is dropped.",
        default=1.01,
        validator=_above_one,
    )


@attrs.frozen(kw_only=True)
class K3RSConfig:
    """Settings of ``k3_rs`` (K3 sequence rejection)."""

    threshold: float = help_field(
        "A sequence whose mean per-token K3 KL(μ‖π_old) exceeds this is dropped.",
        default=0.01,
        validator=_positive,
    )


@attrs.frozen(kw_only=True)
class TrustRegionConfig:
    """Settings of ``trust_region`` (trust-region masking)."""

    delta: float = help_field(
        "A sequence with any token |log π_old − log μ| above this is dropped.",
        default=0.5,
        validator=_positive,
    )


@attrs.frozen(kw_only=True)
class DSV32MaskConfig:
    """Settings of ``dsv32_mask`` (DeepSeek-V3.2 off-policy sequence masking)."""

    delta: float = help_field(
        "A negative-advantage sequence whose mean log μ − log π_θ exceeds this is dropped.",
        default=0.05,
        validator=_positive,
    )


def _log_ratio(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    return masked_fill_zero(old_log_prob.detach().float() - rollout_log_prob.detach().float(), mask)


def _seq_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence mean over valid tokens (B, 1); 0 for a sequence without any."""
    counts = mask.sum(dim=-1, keepdim=True).clamp(min=1)
    return masked_fill_zero(values, mask).sum(dim=-1, keepdim=True) / counts


def _token_share(flags: torch.Tensor, mask: torch.Tensor) -> float:
    valid = int(mask.sum())
    return float((flags & mask).sum()) / valid if valid else 0.0


def _seq_share(seq_flags: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """Share of the sequences with a valid token that are flagged (``seq_flags`` (B, 1)), and
    how many sequences it is over (the actor weights it by sequences, not tokens)."""
    has = mask.any(dim=-1)
    n = int(has.sum())
    return (float((seq_flags.squeeze(-1) & has).sum()) / n if n else 0.0, float(n))


def _ratio(log_ratio: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    if level == "sequence":
        log_ratio = log_ratio.sum(dim=-1, keepdim=True).expand_as(log_ratio)
    return masked_fill_zero(torch.exp(log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)), mask)


def _sequence_drop(
    drop: torch.Tensor, mask: torch.Tensor, name: str, extra: Mapping[str, float] | None = None
) -> CorrectionResult:
    """Drop the sequences flagged in ``drop`` (B, 1); weights stay 1."""
    keep = mask & ~drop.expand_as(mask)
    metrics = {
        f"{name}_masked_seq_share": _seq_share(drop, mask),
        f"{name}_masked_share": _token_share(~keep, mask),
        **(extra or {}),
    }
    return CorrectionResult(weights=mask.float(), keep=keep, metrics=metrics)


def tis(
    *,
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    config: TISConfig | None = None,
    **_: Any,
) -> CorrectionResult:
    """Truncated IS: weight ``min(ρ, cap)`` per token or per sequence."""
    config = config or TISConfig()
    mask = as_bool_mask(response_mask)
    ratio = _ratio(_log_ratio(old_log_prob, rollout_log_prob, mask), mask, config.level)
    over = (ratio > config.cap) & mask
    weights = masked_fill_zero(ratio.clamp(max=config.cap), mask)
    return CorrectionResult(
        weights=weights,
        keep=mask.clone(),
        metrics={"tis_truncated_share": _token_share(over, mask)},
    )


def mis(
    *,
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    config: MISConfig | None = None,
    **_: Any,
) -> CorrectionResult:
    """Masked IS: weight ``ρ`` where ``ρ ≤ cap``, the rest dropped."""
    config = config or MISConfig()
    mask = as_bool_mask(response_mask)
    ratio = _ratio(_log_ratio(old_log_prob, rollout_log_prob, mask), mask, config.level)
    over = (ratio > config.cap) & mask
    keep = mask & ~over
    return CorrectionResult(
        weights=masked_fill_zero(ratio, keep),
        keep=keep,
        metrics={"mis_masked_share": _token_share(over, mask)},
    )


def icepop(
    *,
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    config: BandConfig | None = None,
    **_: Any,
) -> CorrectionResult:
    """IcePop: ``M(ρ_t) = ρ_t`` if ``ρ_t ∈ [1/c, c]`` else 0 multiplies each token's
    policy-gradient term (the paper's ``[α, β]`` is ``[1/c, c]``): a token in the band is
    importance-weighted by its ratio, one outside it is dropped. (It already carries ``ρ_t``:
    stacking ``tis`` on it would weight by ``ρ_t`` twice.)"""
    config = config or BandConfig()
    mask = as_bool_mask(response_mask)
    ratio = _ratio(_log_ratio(old_log_prob, rollout_log_prob, mask), mask, "token")
    out = ((ratio > config.c) | (ratio < 1.0 / config.c)) & mask
    keep = mask & ~out
    return CorrectionResult(
        weights=masked_fill_zero(ratio, keep),
        keep=keep,
        metrics={"icepop_masked_share": _token_share(out, mask)},
    )


def geo_rs(
    *,
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    config: GeoRSConfig | None = None,
    **_: Any,
) -> CorrectionResult:
    """Geometric-mean rejection: drop a sequence whose ``exp(mean_t δ_t)`` leaves ``[1/c, c]``."""
    config = config or GeoRSConfig()
    mask = as_bool_mask(response_mask)
    mean_log = _seq_mean(_log_ratio(old_log_prob, rollout_log_prob, mask), mask)
    bound = float(torch.log(torch.tensor(config.c, dtype=torch.float64)))
    drop = mean_log.abs() > bound
    return _sequence_drop(drop, mask, "geo_rs")


def k3_rs(
    *,
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    config: K3RSConfig | None = None,
    **_: Any,
) -> CorrectionResult:
    """K3 rejection: drop a sequence whose mean ``ρ_t − 1 − δ_t`` exceeds ``threshold``."""
    config = config or K3RSConfig()
    mask = as_bool_mask(response_mask)
    delta = _log_ratio(old_log_prob, rollout_log_prob, mask).clamp(
        -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP
    )
    k3 = torch.exp(delta) - 1.0 - delta
    seq_k3 = _seq_mean(k3, mask)
    drop = seq_k3 > config.threshold
    return _sequence_drop(drop, mask, "k3_rs")


def trust_region(
    *,
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    config: TrustRegionConfig | None = None,
    **_: Any,
) -> CorrectionResult:
    """Trust-region masking: drop a sequence with any ``|δ_t| > delta``."""
    config = config or TrustRegionConfig()
    mask = as_bool_mask(response_mask)
    delta = _log_ratio(old_log_prob, rollout_log_prob, mask).abs()
    drop = ((delta > config.delta) & mask).any(dim=-1, keepdim=True)
    return _sequence_drop(drop, mask, "trust_region")


def dsv32_mask(
    *,
    rollout_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: DSV32MaskConfig | None = None,
    **_: Any,
) -> CorrectionResult:
    """DeepSeek-V3.2: drop a negative-advantage sequence whose mean ``log μ − log π_θ`` > delta."""
    config = config or DSV32MaskConfig()
    mask = as_bool_mask(response_mask)
    kl = _seq_mean(
        masked_fill_zero(rollout_log_prob.detach().float() - log_prob.detach().float(), mask), mask
    )
    # A sequence's advantage: outcome estimators broadcast one value over its tokens.
    seq_adv = _seq_mean(advantages.detach().float(), mask)
    drop = (seq_adv < 0) & (kl > config.delta)
    return _sequence_drop(drop, mask, "dsv32")


STANDARD_CORRECTIONS: Mapping[str, tuple[Callable[..., CorrectionResult], type]] = MappingProxyType(
    {
        "tis": (tis, TISConfig),
        "mis": (mis, MISConfig),
        "icepop": (icepop, BandConfig),
        "geo_rs": (geo_rs, GeoRSConfig),
        "k3_rs": (k3_rs, K3RSConfig),
        "trust_region": (trust_region, TrustRegionConfig),
        "dsv32_mask": (dsv32_mask, DSV32MaskConfig),
    }
)
"""Name -> (correction, its config class), registered by :mod:`.plugin`."""
