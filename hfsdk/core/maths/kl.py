"""KL divergence between the policy and the reference policy, per token.

The estimators (``k1``, ``abs``, ``k2``, ``k3``, ``k3_clamped`` / ``low_var_kl``) are the
``kl_estimators`` registry's (hfsdk-plugin-policy-losses); this module looks them up and
applies them.

The KL enters training either as a per-token reward penalty
(:func:`apply_kl_penalty`, coefficient from a :class:`FixedKLController` or
:class:`AdaptiveKLController`) or as a loss term (:func:`kl_loss`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from hfsdk.core.errors import HfsdkError
from hfsdk.core.maths.masked import check_token_tensors, masked_fill_zero, masked_mean
from hfsdk.core.maths.protocols import KLEstimator


def resolve_kl_estimator(estimator: str | KLEstimator) -> KLEstimator:
    """A KL estimator from a callable or a registered name."""
    if callable(estimator):
        return estimator
    from hfsdk.core.plugin_manager import get_registry

    return get_registry("kl_estimators")[estimator].impl


def token_kl(
    log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    estimator: str | KLEstimator = "k1",
) -> torch.Tensor:
    """Per-token KL with the chosen estimator, exactly 0 at masked positions."""
    check_token_tensors(response_mask, log_prob=log_prob, ref_log_prob=ref_log_prob)
    fn = resolve_kl_estimator(estimator)
    # Masked log-probs are zeroed first so padding garbage (even inf) cannot leak through exp.
    kl = fn(
        masked_fill_zero(log_prob, response_mask), masked_fill_zero(ref_log_prob, response_mask)
    )
    return masked_fill_zero(kl, response_mask)


def apply_kl_penalty(
    token_level_scores: torch.Tensor,
    log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    kl_coef: float,
    estimator: str | KLEstimator = "k1",
) -> tuple[torch.Tensor, dict[str, float]]:
    """KL as a reward penalty: ``rewards = scores − kl_coef · KL`` on every response token.

    Returns the token-level rewards (0 where masked) and metrics: ``kl`` (the
    batch mean of each sequence's mean per-token KL; feed it to
    :meth:`AdaptiveKLController.update`), ``kl_coef`` and ``kl_penalty`` (mean
    per-sequence sum of the penalty).
    """
    check_token_tensors(response_mask, token_level_scores=token_level_scores)
    kl = token_kl(log_prob, ref_log_prob, response_mask, estimator)
    penalty = kl_coef * kl
    rewards = masked_fill_zero(token_level_scores - penalty, response_mask)
    metrics = {
        "kl": float(masked_mean(kl, response_mask, dim=-1).mean().item()),
        "kl_coef": float(kl_coef),
        "kl_penalty": float(penalty.sum(dim=-1).mean().item()),
    }
    return rewards, metrics


class FixedKLController:
    """A constant KL coefficient (``kl_controller: fixed``)."""

    def __init__(self, kl_coef: float) -> None:
        if not (math.isfinite(kl_coef) and kl_coef >= 0):
            raise HfsdkError(f"kl_coef={kl_coef!r}; expected a finite number ≥ 0")
        self.value = float(kl_coef)

    def update(self, current_kl: float, n_steps: int) -> float:
        """Leave the coefficient unchanged and return it."""
        return self.value

    def state_dict(self) -> dict[str, Any]:
        """The controller's state, for checkpoints."""
        return {"kind": "fixed", "value": self.value}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        _check_kind(state, "fixed")
        self.value = float(state["value"])


class AdaptiveKLController:
    """A KL coefficient steered toward a target KL (Ziegler et al., 2019).

    After each step with measured KL ``k`` over ``n_steps`` samples::

        error = clip(k / target_kl − 1, −0.2, 0.2)
        kl_coef ← kl_coef · (1 + error · n_steps / horizon)
    """

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int) -> None:
        if not (math.isfinite(init_kl_coef) and init_kl_coef >= 0):
            raise HfsdkError(f"kl_coef={init_kl_coef!r}; expected a finite number ≥ 0")
        if not target_kl > 0:
            raise HfsdkError(f"target_kl={target_kl!r}; expected a positive number")
        if not horizon > 0:
            raise HfsdkError(f"kl_horizon={horizon!r}; expected a positive number of samples")
        self.value = float(init_kl_coef)
        self.target_kl = float(target_kl)
        self.horizon = int(horizon)

    def update(self, current_kl: float, n_steps: int) -> float:
        """Move the coefficient toward the target after ``n_steps`` samples; return it."""
        if not math.isfinite(current_kl):
            raise HfsdkError(
                f"current_kl={current_kl!r}; the measured KL must be finite (check the "
                "reference model's log-probs)"
            )
        error = min(max(current_kl / self.target_kl - 1.0, -0.2), 0.2)
        if 1.0 + error * n_steps / self.horizon <= 0:  # the sign flips: the reward pays for drift
            raise HfsdkError(
                f"algorithm.kl_horizon={self.horizon} is too small for {n_steps} samples a step "
                "(the adaptive update would turn kl_coef negative); set it above "
                f"{n_steps // 5}, a fifth of the samples, e.g. to {max(10_000, n_steps)}"
            )
        self.value *= 1.0 + error * n_steps / self.horizon
        return self.value

    def state_dict(self) -> dict[str, Any]:
        """The controller's state, for checkpoints."""
        return {
            "kind": "adaptive",
            "value": self.value,
            "target_kl": self.target_kl,
            "horizon": self.horizon,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        _check_kind(state, "adaptive")
        self.value = float(state["value"])
        self.target_kl = float(state["target_kl"])
        self.horizon = int(state["horizon"])


KLController = FixedKLController | AdaptiveKLController


def _check_kind(state: Mapping[str, Any], kind: str) -> None:
    if state.get("kind") != kind:
        raise HfsdkError(
            f"KL controller state is of kind {state.get('kind')!r} but this controller is "
            f"{kind!r}; resume with the same kl_controller setting as the checkpoint"
        )


def build_kl_controller(
    kind: str, kl_coef: float, target_kl: float = 0.1, horizon: int = 10000
) -> KLController:
    """The controller for ``kl_controller`` (``fixed`` or ``adaptive``) in an algorithm config."""
    if kind == "fixed":
        return FixedKLController(kl_coef)
    if kind == "adaptive":
        return AdaptiveKLController(kl_coef, target_kl, horizon)
    raise HfsdkError(f"kl_controller={kind!r}; expected 'fixed' or 'adaptive'")
