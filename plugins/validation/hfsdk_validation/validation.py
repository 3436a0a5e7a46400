"""Validation: n samples per held-out prompt, scored, reduced to mean@n, pass@k and maj@k.

Metric names carry the estimator: ``val/mean@4``, ``val/pass@1``, ``val/pass@4``,
``val/maj@4`` (when ``trainer.val_answer_pattern`` is set), and the same per ``data_source``
(``val/<source>/pass@4``) when the validation data has that column.
``val/reward_mean`` (the mean score of every sample) is kept for old dashboards.
A sample counts as correct when its score is at least
``trainer.val_correct_threshold``. A few generations per validation are kept
for the run directory's ``validation/step_N.jsonl``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from hfsdk import ValidationResult, last_segments
from hfsdk_validation.pass_at_k import default_ks, majority_at_k, mean_pass_at_k


def _match_answer(match: re.Match[str]) -> str | None:
    """A match's answer: the whole match without groups, else the first group that took part.

    With alternatives (``answer is (\\d+)|boxed (\\d+)``) the groups of the alternative that
    did not match are ``None``, so the first group alone would be wrong. An empty answer is
    no answer (no vote).
    """
    if not match.re.groups:
        answer = match.group(0)
    else:
        answer = next((group for group in match.groups() if group is not None), None)
    return answer or None


def _answers(texts: Sequence[str], pattern: str | None) -> list[str | None] | None:
    """Each response's answer (its pattern's last match, else ``None``); ``None``: no pattern."""
    if pattern is None:
        return None
    compiled = re.compile(pattern)
    out: list[str | None] = []
    for text in texts:
        matches = list(compiled.finditer(text))
        out.append(_match_answer(matches[-1]) if matches else None)
    return out


def estimator_metrics(
    scores: Sequence[float],
    n: int,
    ks: Sequence[int],
    threshold: float,
    answers: Sequence[str | None] | None,
    prefix: str,
) -> dict[str, float]:
    """mean@n, pass@k for each k and maj@k of samples grouped n per prompt (consecutive).

    ``answers`` is ``None`` without an answer pattern (no maj@k); with one, maj@k is logged
    even when no response matched (0.0), so a dashboard or ``trainer.keep_best`` finds it.
    """
    rows = [list(scores[i : i + n]) for i in range(0, len(scores), n)]
    correct = [[s >= threshold for s in row] for row in rows]
    metrics = {f"{prefix}mean@{n}": sum(map(sum, rows)) / len(scores)}
    for k in ks:
        metrics[f"{prefix}pass@{k}"] = mean_pass_at_k(correct, k)
    if answers is not None:
        grouped = [list(answers[i : i + n]) for i in range(0, len(answers), n)]
        for k in ks:
            if k > 1:
                metrics[f"{prefix}maj@{k}"] = majority_at_k(grouped, correct, k)
    return metrics


VAL_SEED_OFFSET = 104_729
"""Added to ``trainer.seed`` for validation's sampling seed: a stream apart from the ones
the run's seed starts elsewhere (workers add multiples of 1000 or 7919 per rank)."""


def sampling_seed(trainer: Any) -> int:
    """Validation's sampling seed: the same at every validation of a run.

    The actor samples a call that carries it from this seed (plus its rank) and restores
    its random generators afterwards, so its training generations draw as if there were no
    validation.
    """
    return int(trainer.seed) + VAL_SEED_OFFSET


def validate(algorithm: Any, prompts: Any, scorer: Any, trainer: Any) -> ValidationResult:
    """Generate ``trainer.val_n`` samples per prompt, score them and reduce.

    One sample per prompt is greedy; several are sampled with the rollout's
    settings, from a sampling seed of their own (:func:`sampling_seed`), so
    validating does not change what training samples. ``trainer`` is the run's
    ``TrainerConfig``.
    """
    n = trainer.val_n
    ks = sorted(set(trainer.val_k or default_ks(n)))
    # A new meta dict (the rows are shared): the caller's prompts are left as they were.
    prompts = prompts.select()
    prompts.meta["sampling_seed"] = sampling_seed(trainer)
    # One row per trajectory (the last segment of step-wise ones): n rows per prompt.
    batch = last_segments(algorithm.generate(prompts, n=n, greedy=n == 1))
    scores_tensor, _ = scorer(batch)
    scores = [float(s) for s in scores_tensor]
    texts = list(batch["response_text"])
    answers = _answers(texts, trainer.val_answer_pattern)
    threshold = trainer.val_correct_threshold
    metrics = {"val/reward_mean": sum(scores) / len(scores)}
    metrics.update(estimator_metrics(scores, n, ks, threshold, answers, "val/"))
    if "data_source" in batch.non_tensor_keys:
        by_source: dict[str, list[int]] = defaultdict(list)
        sources = list(batch["data_source"])
        for start in range(0, len(scores), n):
            by_source[str(sources[start])].append(start)
        if len(by_source) > 1:
            for source, starts in sorted(by_source.items()):
                rows = [i for s in starts for i in range(s, s + n)]
                metrics.update(
                    estimator_metrics(
                        [scores[i] for i in rows],
                        n,
                        ks,
                        threshold,
                        None if answers is None else [answers[i] for i in rows],
                        f"val/{source}/",
                    )
                )
    prompts_text = list(batch["raw_prompt"]) if "raw_prompt" in batch.non_tensor_keys else []
    samples = [
        {
            "prompt": str(prompts_text[i]) if prompts_text else None,
            "response": texts[i],
            "score": scores[i],
        }
        for i in range(0, min(len(texts), trainer.val_samples * n), n)
    ]
    return ValidationResult(metrics=metrics, samples=samples)
