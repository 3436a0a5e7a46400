"""Mismatch metrics against a hand computation, per token, per sequence and per turn."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk_rollout_corrections.mismatch import mismatch_metrics, turn_index

# δ = old − rollout: row 0: 0.5, −1.0, 0.0 ; row 1: 1.0, 0.0
OLD = torch.tensor([[-1.0, -2.0, -0.5, 0.0], [-1.0, -1.0, 0.0, 0.0]])
ROLLOUT = torch.tensor([[-1.5, -1.0, -0.5, -9.0], [-2.0, -1.0, -9.0, -9.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])


def _k3(d: float) -> float:
    return math.exp(d) - 1 - d


def test_single_turn_metrics_equal_a_hand_computation() -> None:
    m = mismatch_metrics(OLD, ROLLOUT, MASK)
    gaps = [0.5, 1.0, 0.0, 1.0, 0.0]
    assert m["mismatch/token_gap_mean"] == pytest.approx(sum(gaps) / 5)
    assert m["mismatch/token_gap_max"] == pytest.approx(1.0)
    assert m["mismatch/token_gap_p50"] == pytest.approx(0.5)  # sorted 0, 0, .5, 1, 1
    # sequence gaps |Σ δ|: row 0 |−0.5| = 0.5, row 1 1.0
    assert m["mismatch/seq_gap_mean"] == pytest.approx(0.75)
    assert m["mismatch/seq_gap_max"] == pytest.approx(1.0)
    assert m["mismatch/seq_gap_p50"] == pytest.approx(0.75)
    expected_k3 = sum(_k3(d) for d in (0.5, -1.0, 0.0, 1.0, 0.0)) / 5
    assert m["mismatch/kl_k3"] == pytest.approx(expected_k3)
    assert not any(key.startswith("mismatch/turn_") for key in m)  # one turn each


def test_identical_policies_have_no_mismatch() -> None:
    m = mismatch_metrics(OLD, OLD.clone(), MASK)
    assert m["mismatch/kl_k3"] == 0.0 and m["mismatch/token_gap_max"] == 0.0


def test_multi_turn_responses_report_each_turn() -> None:
    # Row 0: turn 1 = tokens 0-1, a tool token at 2, turn 2 = token 3; row 1 one turn.
    mask = torch.tensor([[1, 1, 0, 1], [1, 1, 0, 0]])
    old = torch.tensor([[0.0, 0.0, 0.0, -1.0], [0.0, 0.0, 0.0, 0.0]])
    rollout = torch.tensor([[-0.2, 0.0, -5.0, 0.0], [0.1, 0.0, 0.0, 0.0]])
    assert turn_index(mask).tolist() == [[1, 1, 0, 2], [1, 1, 0, 0]]
    m = mismatch_metrics(old, rollout, mask)
    turn1 = [0.2, 0.0, -0.1, 0.0]
    assert m["mismatch/turn_1/kl_k3"] == pytest.approx(sum(_k3(d) for d in turn1) / 4)
    assert m["mismatch/turn_1/token_gap_mean"] == pytest.approx(0.3 / 4)
    assert m["mismatch/turn_2/kl_k3"] == pytest.approx(_k3(-1.0))
    assert m["mismatch/turn_2/token_gap_mean"] == pytest.approx(1.0)


def test_percentiles_equal_torch_quantile_and_hold_past_its_size_limit() -> None:
    from hfsdk_rollout_corrections.mismatch import _quantiles

    qs = (0.0, 0.5, 0.9, 0.99, 1.0)
    for n in (1, 2, 7, 1000):
        values = torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
        expected = torch.quantile(values, torch.tensor(qs, dtype=torch.float64)).tolist()
        assert _quantiles(values, qs) == pytest.approx(expected, rel=0, abs=1e-12)
    # torch.quantile refuses more than 2**24 values: a step of 512 x 16 samples x 2k tokens.
    n = 2**24 + 1
    values = torch.arange(n, dtype=torch.float64).flip(0)
    assert _quantiles(values, (0.5, 0.9)) == [0.5 * (n - 1), 0.9 * (n - 1)]


def test_k3_clamps_the_gap_on_both_sides() -> None:
    # δ = +inf (a rollout log-prob of -inf on a sampled token) gave kl_k3 = -inf, below any
    # limit; δ is now clamped to ±20 before the K3, as in k3_rs.
    mask = torch.ones(1, 2)
    m = mismatch_metrics(torch.tensor([[-1.0, -1.0]]), torch.tensor([[-1.0, -math.inf]]), mask)
    assert m["mismatch/kl_k3"] == pytest.approx(_k3(20.0) / 2)
    assert m["mismatch/token_gap_max"] == math.inf  # the gap itself stays as it is
    m = mismatch_metrics(torch.tensor([[-1.0, -31.0]]), torch.tensor([[-1.0, -1.0]]), mask)
    assert m["mismatch/kl_k3"] == pytest.approx(_k3(-20.0) / 2)
    assert m["mismatch/token_gap_max"] == pytest.approx(30.0)


def test_the_observer_tells_the_gate_which_log_probs_are_non_finite() -> None:
    from hfsdk_rollout_corrections.mismatch import non_finite_log_probs

    mask = torch.tensor([[1, 1, 0]])
    fine = torch.tensor([[-1.0, -1.0, math.nan]])  # padding may hold anything
    broken = torch.tensor([[-1.0, -math.inf, 0.0]])
    assert non_finite_log_probs(fine, fine, mask) == ()
    assert non_finite_log_probs(broken, fine, mask) == ("old_log_probs",)
    assert non_finite_log_probs(fine, broken, mask) == ("rollout_log_probs",)
    assert non_finite_log_probs(broken, broken, mask) == ("old_log_probs", "rollout_log_probs")
