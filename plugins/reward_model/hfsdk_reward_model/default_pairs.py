"""The default task's preference pairs: a right answer preferred to a wrong one.

Prompts are the built-in task's (``"a + b ="``); each pair's chosen response
is the sum, its rejected one another number, both with or both without the
task's filler word in front (the forms the policy samples), so a reward model
trained on them scores a PPO run's responses by correctness. Training pairs
come from every prompt of the task's training split; the held-out pairs are
the validation split's prompts with wrong answers that prompt's training pairs
never used (the RL runs these models serve sample those same prompts). Built
once per default-task build, beside it (written to a temporary file, then
renamed).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

WRONG_PER_TRAIN_PROMPT = 8
WRONG_PER_VAL_PROMPT = 2
_VERSION = 3


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pair(prompt: str, answer: int, bad: int, rng: random.Random, spec: Any) -> dict[str, Any]:
    prefix = f"{spec.filler_word} " if rng.random() < 0.5 else ""
    return {
        "prompt": prompt,
        "chosen": f"{prefix}{answer}",
        "rejected": f"{prefix}{bad}",
        "data_source": "default_task",
    }


def build_pairs(
    train_rows: list[dict[str, Any]], val_rows: list[dict[str, Any]], spec: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Training and held-out pairs: no (prompt, wrong answer) of the second is in the first."""
    rng = random.Random(spec.seed)
    wrong: dict[str, list[int]] = {}
    for row in [*train_rows, *val_rows]:
        answer = int(row["answer"])
        if row["prompt"] not in wrong:
            others = [n for n in range(spec.max_answer + 1) if n != answer]
            wrong[row["prompt"]] = rng.sample(others, WRONG_PER_TRAIN_PROMPT + WRONG_PER_VAL_PROMPT)
    train = [
        _pair(r["prompt"], int(r["answer"]), bad, rng, spec)
        for r in train_rows
        for bad in wrong[r["prompt"]][:WRONG_PER_TRAIN_PROMPT]
    ]
    val = [
        _pair(r["prompt"], int(r["answer"]), bad, rng, spec)
        for r in val_rows
        for bad in wrong[r["prompt"]][WRONG_PER_TRAIN_PROMPT:]
    ]
    return train, val


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    from hfsdk import write_text_atomic

    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))


def default_pair_files() -> tuple[Path, Path]:
    """``(train.jsonl, val.jsonl)`` of the default task's pairs (built on first use)."""
    from hfsdk import default_task_assets

    assets = default_task_assets()  # the task registry's default task (its root and spec)
    folder = assets.root / f"preference_pairs_v{_VERSION}"
    train, val = folder / "train.jsonl", folder / "val.jsonl"
    if train.is_file() and val.is_file():
        return train, val
    folder.mkdir(parents=True, exist_ok=True)
    train_pairs, val_pairs = build_pairs(
        _read(Path(assets.train_files[0])), _read(Path(assets.val_files[0])), assets.spec
    )
    _write(val, val_pairs)
    _write(train, train_pairs)
    return train, val


def train_files() -> list[str]:
    """The default pairs' training file (a deferred preset value)."""
    return [str(default_pair_files()[0])]


def val_files() -> list[str]:
    """The default pairs' held-out file (a deferred preset value)."""
    return [str(default_pair_files()[1])]
