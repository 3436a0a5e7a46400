"""Loss aggregation modes: hand-computed values, global counts, micro-batch invariance."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hfsdk.core.errors import HfsdkError
from hfsdk.core.maths.aggregation import (
    LOSS_AGG_MODES,
    LossAggregation,
    aggregate_loss,
    global_counts,
    local_counts,
)

LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
# Third row fully masked: it must count neither as tokens nor as a sequence.
MASK = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", (1 + 2 + 4) / 3),
        ("seq-mean-token-sum", ((1 + 2) + 4) / 2),
        ("seq-mean-token-mean", ((1 + 2) / 2 + 4) / 2),
        ("seq-mean-token-sum-norm", ((1 + 2) + 4) / (2 * 3)),
    ],
)
def test_modes_by_hand(mode: str, expected: float) -> None:
    assert aggregate_loss(LOSS, MASK, mode).item() == pytest.approx(expected)


def test_norm_length_and_global_counts_and_dp_size() -> None:
    agg = LossAggregation(mode="seq-mean-token-sum-norm", norm_length=10)
    assert aggregate_loss(LOSS, MASK, agg).item() == pytest.approx(7 / 20)
    assert agg(LOSS, MASK).item() == pytest.approx(7 / 20)  # the object aggregates too
    token = aggregate_loss(LOSS, MASK, LossAggregation(global_token_count=7))
    assert token.item() == pytest.approx(7 / 7)
    seq_agg = LossAggregation(mode="seq-mean-token-sum", global_seq_count=4, dp_size=2)
    assert aggregate_loss(LOSS, MASK, seq_agg).item() == pytest.approx(7 / 4 * 2)


def test_all_masked_batch_gives_zero_not_nan() -> None:
    for mode in LOSS_AGG_MODES:
        out = aggregate_loss(torch.full((2, 3), float("nan")), torch.zeros(2, 3), mode)
        assert out.item() == 0.0


def test_counts() -> None:
    counts = local_counts(MASK)
    assert (counts.tokens, counts.sequences) == (3.0, 2.0)
    # Without torch.distributed the global counts are the local ones.
    assert global_counts(MASK) == counts
    agg = LossAggregation.from_counts("token-mean", counts, norm_length=5, dp_size=2)
    assert (agg.global_token_count, agg.global_seq_count, agg.norm_length) == (3.0, 2.0, 5)
    assert agg.dp_size == 2


def test_bad_input_errors() -> None:
    with pytest.raises(HfsdkError, match="token-mean, seq-mean-token-sum"):
        aggregate_loss(LOSS, MASK, "mean")
    with pytest.raises(HfsdkError, match="token-mean, seq-mean-token-sum"):
        LossAggregation(mode="mean")
    with pytest.raises(HfsdkError, match="dp_size=0"):
        LossAggregation(dp_size=0)
    with pytest.raises(HfsdkError, match="smaller than this rank's own count 3"):
        aggregate_loss(LOSS, MASK, LossAggregation(global_token_count=2))
    with pytest.raises(HfsdkError, match="loss_mat has shape"):
        aggregate_loss(LOSS[:, :2], MASK, "token-mean")
    with pytest.raises(HfsdkError, match="norm_length"):
        aggregate_loss(LOSS, MASK, LossAggregation(mode="seq-mean-token-sum-norm", norm_length=0))


@settings(max_examples=40, deadline=None)
@given(
    mode=st.sampled_from(LOSS_AGG_MODES),
    seed=st.integers(0, 2**31 - 1),
    batch=st.integers(1, 6),
    length=st.integers(1, 5),
    micro=st.integers(1, 6),
    garbage=st.sampled_from([float("nan"), float("inf"), -1e30, 123.0]),
)
def test_micro_batches_with_global_counts_sum_to_full_batch(
    mode: str, seed: int, batch: int, length: int, micro: int, garbage: float
) -> None:
    """Splitting the batch in pieces and summing their losses gives the full-batch loss.

    Masked entries are overwritten with garbage in the pieces: it must not matter.
    """
    gen = torch.Generator().manual_seed(seed)
    loss = torch.randn(batch, length, generator=gen, dtype=torch.float64)
    mask = torch.rand(batch, length, generator=gen) > 0.4
    full = aggregate_loss(loss, mask, LossAggregation(mode=mode, norm_length=length))
    agg = LossAggregation.from_counts(mode, local_counts(mask), norm_length=length)
    dirty = torch.where(mask, loss, torch.full_like(loss, garbage))
    parts = sum(
        aggregate_loss(lp, mp, agg)
        for lp, mp in zip(dirty.split(micro), mask.split(micro), strict=True)
    )
    assert torch.isfinite(full)
    torch.testing.assert_close(parts, full)
