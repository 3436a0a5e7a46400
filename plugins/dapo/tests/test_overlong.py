"""DAPO's soft overlong penalty, against the paper's piecewise formula."""

from __future__ import annotations

import pytest
import torch

from hfsdk_dapo.overlong import overlong_penalty


def test_zero_before_the_buffer_linear_inside_it_full_beyond() -> None:
    lengths = torch.tensor([10, 16, 18, 20, 25])
    # L_max 20, L_cache 4: free up to 16, then -(L - 16) / 4, capped at -1 (x factor 0.5).
    got = overlong_penalty(lengths, max_length=20, buffer=4, factor=0.5)
    assert got.tolist() == pytest.approx([0.0, 0.0, -0.25, -0.5, -0.5])


def test_no_buffer_is_no_penalty() -> None:
    assert overlong_penalty(torch.tensor([5, 50]), 20, 0, 1.0).tolist() == [0.0, 0.0]
