"""The standard per-token KL estimators (``hfsdk_register_kl_estimators``).

With ``d = log_prob - ref_log_prob`` (log π(y_t) − log π_ref(y_t), sampled from π):

- ``k1``:  d                          (unbiased, high variance, can be negative)
- ``abs``: |d|
- ``k2``:  ½·d²                       (biased, low variance)
- ``k3``:  exp(−d) + d − 1            (unbiased, low variance, always ≥ 0)
- ``k3_clamped`` (alias ``low_var_kl``): k3 with −d clamped to [−20, 20] before
  ``exp`` and the result clamped to [−10, 10], so one extreme token cannot
  blow up a step.

The core looks them up by name (``algorithm.kl_estimator``, ``hfsdk.token_kl``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from hfsdk import KLEstimator

K3_LOG_RATIO_CLAMP = 20.0
"""Bound on |log π_ref − log π| before ``exp`` in ``k3_clamped`` (exp(20) ≈ 5e8)."""
K3_VALUE_CLAMP = 10.0
"""Bound on the per-token value of ``k3_clamped``."""


def kl_k1(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    """k1: ``log_prob − ref_log_prob`` per token (unbiased, may be negative)."""
    return log_prob - ref_log_prob


def kl_abs(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    """abs: ``|log_prob − ref_log_prob|`` per token."""
    return (log_prob - ref_log_prob).abs()


def kl_k2(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    """k2: ``½ (log_prob − ref_log_prob)²`` per token (low variance, biased)."""
    return 0.5 * (log_prob - ref_log_prob).square()


def kl_k3(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    """k3: ``exp(ref − logp) − (ref − logp) − 1`` per token (unbiased, non-negative)."""
    log_ratio = ref_log_prob - log_prob
    return torch.exp(log_ratio) - log_ratio - 1


def kl_k3_clamped(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    """k3 clamped for stability: log ratio to ±20 before ``exp``, value to ±10 after."""
    log_ratio = (ref_log_prob - log_prob).clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)
    kl = torch.exp(log_ratio) - log_ratio - 1
    return kl.clamp(-K3_VALUE_CLAMP, K3_VALUE_CLAMP)


KL_ESTIMATORS: Mapping[str, KLEstimator] = {
    "k1": kl_k1,
    "abs": kl_abs,
    "k2": kl_k2,
    "k3": kl_k3,
    "k3_clamped": kl_k3_clamped,
    "low_var_kl": kl_k3_clamped,
}
"""The estimators by name (registered as ``kl_estimators`` by this plugin)."""
