"""Rollout–training mismatch metrics: how far the rollout's sampling policy is from π_old.

With ``δ_t = log π_old(y_t) − log μ(y_t)`` over the valid tokens (``μ`` the
rollout's ``rollout_log_probs``, ``π_old`` the training engine's
``old_log_probs`` of the same tokens):

- ``mismatch/token_gap_{mean,max,p50,p90,p99}``: of ``|δ_t|``;
- ``mismatch/seq_gap_{mean,max,p50,p90,p99}``: of ``|Σ_t δ_t|`` per sequence
  (the log of the sequence-level ratio);
- ``mismatch/kl_k3``: the K3 estimate of KL(μ‖π_old) on μ's samples, the mean of
  ``e^δ − 1 − δ`` with δ clamped to ±20 (≥ 0 per token, unbiased, low variance;
  Schulman, 2020);
- ``mismatch/turn_{k}/kl_k3`` and ``mismatch/turn_{k}/token_gap_mean`` for model
  turn ``k`` (1-based; each maximal run of the response mask is a turn), when
  some response has more than one turn (multi-turn rollouts).

They come to every step's line from :class:`MismatchObserver` (a step observer),
which also stops a run whose ``mismatch/kl_k3`` exceeds ``trainer.max_mismatch_kl``, or
whose metrics are not finite (a NaN or infinite log-prob on a response token)
(:class:`MismatchStop`, once the step's line is written; the trainer saves the step).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from hfsdk import StepObserver, StepView, StopRun, as_bool_mask

LOG_RATIO_CLAMP = 20.0
"""Bound on ``|δ|`` before the K3 (as ``k3_rs``): ``e^δ`` of a large gap overflows, and
``−δ`` of an infinite one made the mean ``−inf``."""

MAX_TURNS_REPORTED = 8
"""Turns beyond this many are folded into the last reported one."""


def _quantiles(values: torch.Tensor, qs: tuple[float, ...]) -> list[float]:
    """``torch.quantile``'s linear interpolation, at any size: it refuses more than 2**24
    values, fewer than one step of a large run has tokens."""
    ordered = values.flatten().sort().values
    out = []
    for q in qs:
        position = q * (ordered.numel() - 1)
        low, high = ordered[math.floor(position)], ordered[math.ceil(position)]
        out.append(float(low + (position - math.floor(position)) * (high - low)))
    return out


def _percentiles(values: torch.Tensor, prefix: str) -> dict[str, float]:
    if values.numel() == 0:
        return {f"{prefix}_{k}": 0.0 for k in ("mean", "max", "p50", "p90", "p99")}
    v = values.double()
    q = _quantiles(v, (0.5, 0.9, 0.99))
    return {
        f"{prefix}_mean": float(v.mean()),
        f"{prefix}_max": float(v.max()),
        f"{prefix}_p50": q[0],
        f"{prefix}_p90": q[1],
        f"{prefix}_p99": q[2],
    }


def turn_index(response_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) long: the 1-based model turn of each valid token, 0 off the mask."""
    mask = as_bool_mask(response_mask)
    starts = mask & ~torch.nn.functional.pad(mask[:, :-1], (1, 0), value=False)
    return torch.where(mask, starts.long().cumsum(dim=-1), torch.zeros_like(mask, dtype=torch.long))


def mismatch_metrics(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, response_mask: torch.Tensor
) -> dict[str, float]:
    """The ``mismatch/*`` metrics of one batch (see the module docstring)."""
    mask = as_bool_mask(response_mask)
    delta = (old_log_prob.double() - rollout_log_prob.double()).masked_fill(~mask, 0.0)
    # Both sides: an infinite δ (a -inf log-prob) left `expm1(20) - inf` = -inf, below any
    # limit. A NaN δ stays NaN, so the gate still sees it.
    clamped = delta.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    k3 = (torch.expm1(clamped) - clamped).masked_fill(~mask, 0.0)
    out = {
        **{f"mismatch/{k}": v for k, v in _percentiles(delta.abs()[mask], "token_gap").items()},
        **{
            f"mismatch/{k}": v
            for k, v in _percentiles(delta.sum(dim=-1).abs()[mask.any(dim=-1)], "seq_gap").items()
        },
        "mismatch/kl_k3": float(k3[mask].mean()) if bool(mask.any()) else 0.0,
    }
    turns = turn_index(mask).clamp(max=MAX_TURNS_REPORTED)
    if turns.numel() and int(turns.max()) > 1:
        for k in range(1, int(turns.max()) + 1):
            at = turns == k
            out[f"mismatch/turn_{k}/kl_k3"] = float(k3[at].mean())
            out[f"mismatch/turn_{k}/token_gap_mean"] = float(delta.abs()[at].mean())
    return out


def non_finite_log_probs(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, response_mask: torch.Tensor
) -> tuple[str, ...]:
    """The batch keys (``old_log_probs``, ``rollout_log_probs``) non-finite on some valid
    token, so that the gate can say which to check (padding may hold anything)."""
    mask = as_bool_mask(response_mask)
    return tuple(
        key
        for key, values in (
            ("old_log_probs", old_log_prob),
            ("rollout_log_probs", rollout_log_prob),
        )
        if bool((mask & ~torch.isfinite(values)).any())
    )


_WHERE = {
    "old_log_probs": "old_log_probs (the training engine's)",
    "rollout_log_probs": "rollout_log_probs (the rollout backend's)",
}


class MismatchStop(StopRun):
    """The rollout–training mismatch passed ``trainer.max_mismatch_kl`` (or its metrics are not
    finite); the step is saved."""


def mismatch_gate(
    limit: float | None, metrics: Mapping[str, Any], *, non_finite: Sequence[str] = ()
) -> str | None:
    """Why the run must stop after a step with these metrics, or ``None``.

    A non-finite ``mismatch/*`` value (NaN or ±inf: a broken log-prob on a response token)
    stops it too; ``non_finite`` names the batch keys at fault
    (:func:`non_finite_log_probs`), without it the line says to check both.
    """
    value = metrics.get("mismatch/kl_k3")
    if limit is None or value is None:
        return None
    # `not value > limit` alone let NaN and -inf through: the broken rollouts the gate is for.
    broken = {
        key: v
        for key, v in metrics.items()
        if key.startswith("mismatch/") and isinstance(v, int | float) and not math.isfinite(v)
    }
    if broken:
        # kl_k3 (the gated value), then the first broken one, token_gap_max if it is.
        second = (
            "mismatch/token_gap_max" if "mismatch/token_gap_max" in broken else next(iter(broken))
        )
        shown = {"mismatch/kl_k3": value, second: broken.get(second, value)}
        values = ", ".join(f"{key}={v:.4g}" for key, v in shown.items())
        keys = [k for k in non_finite if k in _WHERE] or list(_WHERE)
        where = " and ".join(_WHERE[k] for k in keys)
        unsure = "" if non_finite else " (the metrics cannot tell which)"
        return (
            f"{values}: the log-probs are non-finite (NaN or inf) on a response token, which "
            f"trainer.max_mismatch_kl={limit:g} does not let through; check {where}{unsure}: a "
            "-inf log-prob is a sampled token given probability 0 (compare the rollout's "
            "sampling settings), a NaN one an overflow (check the model's dtype)"
        )
    if not value > limit:
        return None
    return (
        f"mismatch/kl_k3={value:.4g} exceeds trainer.max_mismatch_kl={limit:g} (the rollout "
        "samples from another policy than the one trained: check the weight sync, the "
        "rollout's dtype and sampling settings, or add a rollout correction)"
    )


class MismatchObserver(StepObserver):
    """Adds the ``mismatch/*`` metrics of each step's trained batch to its line, when the
    batch has both the rollout's and the training engine's log-probs."""

    def __init__(self) -> None:
        self._metrics: dict[str, float] = {}
        self._non_finite: tuple[str, ...] = ()

    def on_step_trained(self, view: StepView) -> None:
        """Measure the trained batch now: the trainer drops ``last_batch`` before the metrics."""
        batch = view.algorithm.last_batch
        if batch is None or "rollout_log_probs" not in batch or "old_log_probs" not in batch:
            self._metrics, self._non_finite = {}, ()
            return
        args = (batch["old_log_probs"], batch["rollout_log_probs"], batch["response_mask"])
        self._metrics = mismatch_metrics(*args)
        self._non_finite = non_finite_log_probs(*args)

    def on_step_metrics(self, view: StepView, metrics: Mapping[str, float]) -> Mapping[str, float]:
        """The metrics measured at :meth:`on_step_trained` (none without ``rollout_log_probs``)."""
        out, self._metrics = self._metrics, {}
        return out

    def on_step_logged(self, view: StepView, metrics: Mapping[str, float]) -> None:
        """Stop the run (saved by the trainer) when ``mismatch/kl_k3`` passes the limit or a
        ``mismatch/*`` metric is not finite."""
        non_finite, self._non_finite = self._non_finite, ()
        gate = mismatch_gate(view.config.trainer.max_mismatch_kl, metrics, non_finite=non_finite)
        if gate:
            raise MismatchStop(f"step {view.step}: {gate}")


def mismatch_observer(_config: Any, _run_dir: Path) -> MismatchObserver:
    """The ``mismatch`` step observer's factory: every run gets it (it costs nothing on a
    batch without ``rollout_log_probs``)."""
    return MismatchObserver()
