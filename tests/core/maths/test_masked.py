"""Masked reductions: hand-computed values, garbage at masked positions, shape errors."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk.core.maths.masked import (
    check_per_sample,
    check_token_tensors,
    masked_mean,
    masked_sum,
    masked_var,
    masked_whiten,
)

NAN, INF = float("nan"), float("inf")
VALUES = torch.tensor([[1.0, 2.0, NAN], [4.0, INF, 6.0]])
MASK = torch.tensor([[1, 1, 0], [1, 0, 1]])


def test_masked_sum_and_mean_ignore_masked_nan_and_inf() -> None:
    assert masked_sum(VALUES, MASK).item() == 13.0
    assert masked_mean(VALUES, MASK).item() == 13.0 / 4
    assert masked_mean(VALUES, MASK, dim=-1).tolist() == [1.5, 5.0]


def test_masked_var_is_bessel_corrected() -> None:
    valid = [1.0, 2.0, 4.0, 6.0]
    mean = sum(valid) / 4
    expected = sum((v - mean) ** 2 for v in valid) / 3
    assert masked_var(VALUES, MASK).item() == pytest.approx(expected)
    assert masked_var(VALUES, MASK, unbiased=False).item() == pytest.approx(expected * 3 / 4)


def test_masked_whiten_matches_reference_loop() -> None:
    valid = [1.0, 2.0, 4.0, 6.0]
    mean = sum(valid) / 4
    std = math.sqrt(sum((v - mean) ** 2 for v in valid) / 3 + 1e-8)
    out = masked_whiten(VALUES, MASK)
    expected = [
        [(1 - mean) / std, (2 - mean) / std, 0.0],
        [(4 - mean) / std, 0.0, (6 - mean) / std],
    ]
    torch.testing.assert_close(out, torch.tensor(expected))


def test_whiten_with_one_or_no_valid_entry_gives_zeros_not_nan() -> None:
    one = masked_whiten(torch.tensor([[3.0, 5.0]]), torch.tensor([[1, 0]]))
    none = masked_whiten(torch.tensor([[3.0, NAN]]), torch.tensor([[0, 0]]))
    assert one.tolist() == [[0.0, 0.0]]
    assert none.tolist() == [[0.0, 0.0]]
    assert masked_mean(torch.tensor([[NAN]]), torch.tensor([[0]])).item() == 0.0


def test_shape_mismatch_names_both_tensors() -> None:
    with pytest.raises(HfsdkError, match=r"values has shape \(2, 4\) but response_mask has shape"):
        check_token_tensors(torch.ones(2, 3), values=torch.ones(2, 4))
    with pytest.raises(HfsdkError, match="expected a 2-D"):
        check_token_tensors(torch.ones(3))
    with pytest.raises(HfsdkError, match="group_index has 3 entries; expected 2"):
        check_per_sample("group_index", ["a", "b", "c"], 2)
    with pytest.raises(HfsdkError, match=r"reward_baselines has shape \(2, 1\)"):
        check_per_sample("reward_baselines", torch.ones(2, 1), 2)
