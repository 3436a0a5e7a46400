"""``trainer.max_mismatch_kl``: a run whose rollout drifts from the trained policy stops, saved.

The gate is the ``mismatch`` observer's (moved from ``tests/core/trainer``); a run that stops
on it is tested in ``test_in_a_run.py``."""

from __future__ import annotations

from hfsdk_rollout_corrections.mismatch import mismatch_gate


def test_the_gate_names_the_value_and_the_limit() -> None:
    assert mismatch_gate(None, {"mismatch/kl_k3": 5.0}) is None
    assert mismatch_gate(0.1, {}) is None
    assert mismatch_gate(0.1, {"mismatch/kl_k3": 0.1}) is None
    line = mismatch_gate(0.1, {"mismatch/kl_k3": 0.25})
    assert "mismatch/kl_k3=0.25" in line and "trainer.max_mismatch_kl=0.1" in line
