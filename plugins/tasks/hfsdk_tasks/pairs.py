"""The default task as preference pairs: the right answer chosen over a wrong one.

For algorithms that learn from comparisons (DPO, Bradley-Terry reward and cost
models). Each prompt ``"a + b ="`` gets ``PAIRS_PER_PROMPT`` rows
``{"prompt", "chosen": "<a+b>", "rejected": "<a wrong number>", "answer"}``
(the ``answer`` column keeps the task's reward function usable on validation
samples). Wrong answers are drawn from ``0 .. max_answer`` without the right one
and without the prompt's earlier ones (so a training prompt's pairs differ, and a
validation pair is never a training pair), seeded by the spec, so the files are the
same on every machine.

The files are written beside the default task's prompt data the first time
they are asked for (atomically), without rebuilding the cached model.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Literal

from hfsdk import HfsdkError, write_text_atomic
from hfsdk_tasks.assets import DefaultAssets
from hfsdk_tasks.spec import DefaultTaskSpec
from hfsdk_tasks.task import task_rows, validation_rows

PAIRS_PER_PROMPT = 2
"""Rows per training prompt, each with another wrong answer."""

_VERSION = 3
"""The files' version: bumped when the pairs drawn change, so older caches are rebuilt."""


def preference_rows(spec: DefaultTaskSpec, split: Literal["train", "val"]) -> list[dict[str, str]]:
    """The split's pairs: training prompts ``PAIRS_PER_PROMPT`` times, validation ones once.

    A validation prompt (the validation split samples the training prompts) gets a wrong
    answer its training pairs never used, so no validation pair is a training pair."""
    train = _draw(spec, task_rows(spec), PAIRS_PER_PROMPT, 17, {})
    if split == "train":
        return train
    used: dict[str, set[str]] = {}
    for row in train:
        used.setdefault(row["prompt"], set()).add(row["rejected"])
    return _draw(spec, validation_rows(spec), 1, 29, used)


def _draw(
    spec: DefaultTaskSpec,
    prompts: list[dict[str, str]],
    repeats: int,
    salt: int,
    used: dict[str, set[str]],
) -> list[dict[str, str]]:
    """``repeats`` pairs per prompt, each wrong answer drawn from those not in ``used``
    nor drawn for the prompt before (``used`` itself is left as it was)."""
    rng = random.Random(spec.seed + salt)
    # Grown as pairs are drawn, so a prompt's repeats never share a wrong answer.
    taken_by_prompt = {prompt: set(answers) for prompt, answers in used.items()}
    rows = []
    for _ in range(repeats):
        for row in prompts:
            right = int(row["answer"])
            taken = taken_by_prompt.setdefault(row["prompt"], set())
            left = [n for n in range(spec.max_answer + 1) if n != right and str(n) not in taken]
            if not left:
                raise HfsdkError(
                    f"max_operand={spec.max_operand} leaves {row['prompt']!r} too few wrong "
                    f"answers for {PAIRS_PER_PROMPT} training pairs and a validation pair "
                    f"that differ; use max_operand >= 2"
                )
            wrong = rng.choice(left)
            taken.add(str(wrong))
            rows.append(
                {
                    "prompt": row["prompt"],
                    "chosen": str(right),
                    "rejected": str(wrong),
                    "answer": row["answer"],
                }
            )
    return rows


def ensure_preference_pairs(assets: DefaultAssets) -> tuple[Path, Path]:
    """``(train, val)`` jsonl files of the default task's pairs, written on first use."""
    directory = assets.root / "data"
    # Versioned so caches of an older draw are not read: v2's validation pairs avoid the
    # training pairs (the unversioned files, drawn independently, shared 4 of 32); v3's
    # training prompts get a different wrong answer in each pair (v2 repeated 8 of 200).
    paths = (
        directory / f"pairs_train_v{_VERSION}.jsonl",
        directory / f"pairs_val_v{_VERSION}.jsonl",
    )
    for split, path in zip(("train", "val"), paths, strict=True):
        if path.is_file():
            continue
        lines = "".join(json.dumps(r) + "\n" for r in preference_rows(assets.spec, split))
        # Another process writing the same bytes at the same time is harmless.
        write_text_atomic(path, lines)
    return paths
