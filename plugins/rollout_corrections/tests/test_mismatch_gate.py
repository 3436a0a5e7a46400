"""``trainer.max_mismatch_kl``: a run whose rollout drifts from the trained policy stops, saved.

The gate is the ``mismatch`` observer's (moved from ``tests/core/trainer``); a run that stops
on it is tested in ``test_in_a_run.py``."""

from __future__ import annotations

import math

from hfsdk_rollout_corrections.mismatch import mismatch_gate


def test_the_gate_names_the_value_and_the_limit() -> None:
    assert mismatch_gate(None, {"mismatch/kl_k3": 5.0}) is None
    assert mismatch_gate(0.1, {}) is None
    assert mismatch_gate(0.1, {"mismatch/kl_k3": 0.1}) is None
    line = mismatch_gate(0.1, {"mismatch/kl_k3": 0.25})
    assert "mismatch/kl_k3=0.25" in line and "trainer.max_mismatch_kl=0.1" in line


def _broken(*, old_nan: bool = False, rollout_inf: bool = False) -> dict[str, float]:
    """The mismatch metrics of a batch whose log-probs are broken on one valid token."""
    import torch

    from hfsdk_rollout_corrections.mismatch import mismatch_metrics

    old, rollout = torch.full((2, 4), -1.0), torch.full((2, 4), -1.0)
    if old_nan:
        old[0, 1] = float("nan")
    if rollout_inf:
        rollout[0, 2] = float("-inf")
    return mismatch_metrics(old, rollout, torch.ones(2, 4))


def test_non_finite_log_probs_stop_the_run() -> None:
    # Before: `not value > limit` let NaN and -inf through, so the gate never stopped a run
    # whose log-probs were broken, the very case it is for.
    for metrics in (_broken(old_nan=True), _broken(rollout_inf=True), {"mismatch/kl_k3": math.nan}):
        line = mismatch_gate(0.1, metrics)
        assert line is not None and "non-finite" in line, metrics
        assert "old_log_probs" in line and "rollout_log_probs" in line  # the metrics can't tell
    assert mismatch_gate(None, _broken(old_nan=True)) is None  # no limit: no gate
    assert mismatch_gate(0.1, {"mismatch/kl_k3": 0.05, "mismatch/token_gap_max": math.inf})


def test_the_gate_names_the_side_that_is_non_finite_when_told() -> None:
    line = mismatch_gate(0.1, _broken(rollout_inf=True), non_finite=("rollout_log_probs",))
    assert "rollout_log_probs" in line and "old_log_probs" not in line
    line = mismatch_gate(0.1, _broken(old_nan=True), non_finite=("old_log_probs",))
    assert "old_log_probs" in line and "rollout_log_probs" not in line
