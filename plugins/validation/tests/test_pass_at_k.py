"""pass@k equals the unbiased formula on hand-made cases; maj@k votes as documented."""

from __future__ import annotations

from math import comb

import pytest

from hfsdk_validation.pass_at_k import default_ks, majority_at_k, mean_pass_at_k, pass_at_k


@pytest.mark.parametrize(
    ("n", "c", "k"), [(4, 1, 1), (4, 1, 2), (10, 3, 4), (8, 0, 3), (5, 5, 2), (16, 2, 16)]
)
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


def test_majority_averages_over_every_k_subset() -> None:
    answers = [["3", "4", "4", None], ["7", None, None, None], [None, None, None, None]]
    correct = [[True, False, False, False], [True, False, False, False], [False] * 4]
    # k=1: each sample alone; prompt 0: 1 of 4 right, prompt 1: 1 of 4, prompt 2: none.
    assert majority_at_k(answers, correct, 1) == pytest.approx((1 / 4 + 1 / 4) / 3)
    # k=2 on prompt 0, the 6 pairs: {3,4} twice a tie (half right), {3,None} right,
    # {4,4} wrong, {4,None} twice wrong: (0.5 + 0.5 + 1) / 6. Prompt 1: 3 of 6 pairs hold "7".
    expected = ((0.5 + 0.5 + 1) / 6 + 3 / 6 + 0) / 3
    assert majority_at_k(answers, correct, 2) == pytest.approx(expected)


def test_the_first_k_samples_are_not_the_estimate() -> None:
    # The first two samples agree on a wrong answer; most pairs do not.
    answers = [["1", "1", "2", "2", "2"]]
    correct = [[False, False, True, True, True]]
    # Pairs: {1,1} wrong; {2,2} x3 right; {1,2} x6 ties, half right: (3 + 3) / 10.
    assert majority_at_k(answers, correct, 2) == pytest.approx(0.6)


def test_many_subsets_are_sampled_reproducibly() -> None:
    answers = [[str(i % 3) for i in range(40)]]
    correct = [[i % 3 == 0 for i in range(40)]]
    first = majority_at_k(answers, correct, 20)
    assert first == majority_at_k(answers, correct, 20)
    assert 0.2 < first < 0.8


def test_default_ks() -> None:
    assert default_ks(1) == [1]
    assert default_ks(4) == [1, 2, 4]
    assert default_ks(6) == [1, 2, 4, 6]
