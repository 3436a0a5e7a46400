"""Validation estimators over n samples per prompt: pass@k, mean@n, maj@k.

``pass@k`` is the unbiased estimator of the chance that at least one of k
samples drawn (without replacement) from the n generated for a prompt is
correct, given c of the n are: ``1 - C(n - c, k) / C(n, k)`` (Chen et al.,
2021), averaged over prompts. ``maj@k`` is, likewise, the chance that the most
frequent answer among k of the n samples is a correct one, averaged over the
k-subsets and over prompts.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one prompt with ``c`` correct out of ``n`` samples (``k ≤ n``)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    # 1 - prod_{i=n-c+1}^{n} (1 - k / i): the ratio of binomials without big integers.
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(correct: Sequence[Sequence[bool]], k: int) -> float:
    """pass@k averaged over prompts; ``correct[p]`` are prompt p's n sample outcomes."""
    return sum(pass_at_k(len(row), sum(map(bool, row)), k) for row in correct) / len(correct)


MAJORITY_SUBSETS = 4096
"""Above this many k-subsets of a prompt's n samples, maj@k averages over this many drawn ones."""


def _majority_correct(answers: Sequence[str | None], correct: Sequence[bool]) -> float:
    """Whether the vote of these samples is right; a tie is split evenly among the tied.

    Samples without an answer (``None``) do not vote; no votes at all is wrong.
    An answer is right when the first sample giving it is.
    """
    votes = Counter(a for a in answers if a is not None)
    if not votes:
        return 0.0
    top = max(votes.values())
    first: dict[str, bool] = {}
    for answer, ok in zip(answers, correct, strict=True):
        if answer is not None:
            first.setdefault(answer, bool(ok))
    tied = [answer for answer, count in votes.items() if count == top]
    return sum(first[answer] for answer in tied) / len(tied)


def majority_at_k(
    answers: Sequence[Sequence[str | None]],
    correct: Sequence[Sequence[bool]],
    k: int,
    *,
    seed: int = 0,
) -> float:
    """maj@k: the chance that the vote of k of a prompt's n samples is right, averaged over
    prompts.

    The expectation runs over every k-subset of the n samples (exactly when there
    are at most :data:`MAJORITY_SUBSETS` of them, else over that many drawn
    without replacement within each, from ``seed``), as pass@k's does; voting
    over the first k samples alone would be a one-subset estimate with its
    variance. Ties are split evenly among the tied answers.
    """
    rng = random.Random(seed)
    total = 0.0
    for row_answers, row_correct in zip(answers, correct, strict=True):
        n = len(row_answers)
        if not 1 <= k <= n:
            raise ValueError(f"maj@k needs 1 <= k <= n; got n={n}, k={k}")
        if math.comb(n, k) <= MAJORITY_SUBSETS:
            subsets: Iterable[Sequence[int]] = itertools.combinations(range(n), k)
        else:
            subsets = [sorted(rng.sample(range(n), k)) for _ in range(MAJORITY_SUBSETS)]
        scores = [
            _majority_correct([row_answers[i] for i in s], [row_correct[i] for i in s])
            for s in subsets
        ]
        total += sum(scores) / len(scores)
    return total / len(answers)


def default_ks(n: int) -> list[int]:
    """The k reported for n samples: 1, then powers of two up to n, and n itself."""
    ks, k = [1], 2
    while k < n:
        ks.append(k)
        k *= 2
    if n > 1:
        ks.append(n)
    return ks
