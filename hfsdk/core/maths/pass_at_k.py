"""Validation estimators over n samples per prompt: pass@k, mean@n, maj@k.

``pass@k`` is the unbiased estimator of the chance that at least one of k
samples drawn (without replacement) from the n generated for a prompt is
correct, given c of the n are: ``1 - C(n - c, k) / C(n, k)`` (Chen et al.,
2021), averaged over prompts. ``maj@k`` is the share of prompts whose most
frequent answer among their first k samples is a correct one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


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


def majority_at_k(
    answers: Sequence[Sequence[str | None]], correct: Sequence[Sequence[bool]], k: int
) -> float:
    """Share of prompts whose most common answer among the first ``k`` samples is correct.

    Samples without an answer (``None``) do not vote; ties go to the answer
    seen first. A prompt with no answers counts as wrong.
    """
    hits = 0
    for row_answers, row_correct in zip(answers, correct, strict=True):
        votes = Counter(a for a in row_answers[:k] if a is not None)
        if not votes:
            continue
        top = max(votes.values())
        winner = next(a for a in row_answers[:k] if a is not None and votes[a] == top)
        index = row_answers.index(winner)
        hits += bool(row_correct[index])
    return hits / len(answers)


def default_ks(n: int) -> list[int]:
    """The k reported for n samples: 1, then powers of two up to n, and n itself."""
    ks, k = [1], 2
    while k < n:
        ks.append(k)
        k *= 2
    if n > 1:
        ks.append(n)
    return ks
