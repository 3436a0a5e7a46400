"""The default task as preference pairs: the right answer chosen over a wrong one.

For algorithms that learn from comparisons (DPO, Bradley-Terry reward and cost
models). Each prompt ``"a + b ="`` gets ``PAIRS_PER_PROMPT`` rows
``{"prompt", "chosen": "<a+b>", "rejected": "<a wrong number>", "answer"}``
(the ``answer`` column keeps the task's reward function usable on validation
samples). Wrong answers are drawn from ``0 .. max_answer`` without the right one,
seeded by the spec, so the files are the same on every machine.

The files are written beside the default task's prompt data the first time
they are asked for (atomically), without rebuilding the cached model.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Literal

from hfsdk import write_text_atomic
from hfsdk_tasks.assets import DefaultAssets
from hfsdk_tasks.spec import DefaultTaskSpec
from hfsdk_tasks.task import task_rows, validation_rows

PAIRS_PER_PROMPT = 2
"""Rows per training prompt, each with another wrong answer."""


def preference_rows(spec: DefaultTaskSpec, split: Literal["train", "val"]) -> list[dict[str, str]]:
    """The split's pairs: training prompts ``PAIRS_PER_PROMPT`` times, validation ones once."""
    prompts = task_rows(spec) if split == "train" else validation_rows(spec)
    repeats = PAIRS_PER_PROMPT if split == "train" else 1
    rng = random.Random(spec.seed + (17 if split == "train" else 29))
    rows = []
    for _ in range(repeats):
        for row in prompts:
            right = int(row["answer"])
            wrong = rng.choice([n for n in range(spec.max_answer + 1) if n != right])
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
    paths = (directory / "pairs_train.jsonl", directory / "pairs_val.jsonl")
    for split, path in zip(("train", "val"), paths, strict=True):
        if path.is_file():
            continue
        lines = "".join(json.dumps(r) + "\n" for r in preference_rows(assets.spec, split))
        # Another process writing the same bytes at the same time is harmless.
        write_text_atomic(path, lines)
    return paths
