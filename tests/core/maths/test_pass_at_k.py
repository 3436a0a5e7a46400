"""pass@k equals the unbiased formula on hand-made cases; maj@k votes as documented."""

from __future__ import annotations

from math import comb

import pytest

from hfsdk.core.maths.pass_at_k import default_ks, majority_at_k, mean_pass_at_k, pass_at_k


@pytest.mark.parametrize(("n", "c", "k"), [(4, 1, 1), (4, 1, 2), (10, 3, 4), (8, 0, 3), (5, 5, 2), (16, 2, 16)])
def test_pass_at_k_is_one_minus_the_ratio_of_binomials(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_hand_computed_values() -> None:
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)  # one right of four, one draw
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 2, 3) == 1.0  # three draws cannot all miss two right ones of four
    assert mean_pass_at_k([[True, False, False, False], [True, True, True, True]], 1) == 0.625


def test_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 5)


def test_majority_vote_counts_the_most_common_answer() -> None:
    answers = [["3", "4", "4", None], ["7", None, None, None], [None, None, None, None]]
    correct = [[True, False, False, False], [True, False, False, False], [False] * 4]
    # Prompt 0: "4" wins 2:1 and is wrong; prompt 1: "7" is the only vote and right.
    assert majority_at_k(answers, correct, 4) == pytest.approx(1 / 3)
    # With k=1 only the first sample votes: prompt 0 is right now.
    assert majority_at_k(answers, correct, 1) == pytest.approx(2 / 3)


def test_default_ks() -> None:
    assert default_ks(1) == [1]
    assert default_ks(4) == [1, 2, 4]
    assert default_ks(6) == [1, 2, 4, 6]
