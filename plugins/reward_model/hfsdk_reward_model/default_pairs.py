"""The default task's preference pairs: a right answer preferred to a wrong one.

Prompts are the built-in task's (``"a + b ="``); each pair's chosen response
is the sum, its rejected one another number, both with or both without the
task's filler word in front (the forms the policy samples), so a reward model
trained on them scores a PPO run's responses by correctness. The validation
prompts of the task are held out: no training pair uses them. Built once per
default-task build, beside it (written to a temporary file, then renamed).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

WRONG_PER_TRAIN_PROMPT = 4
WRONG_PER_VAL_PROMPT = 2
_VERSION = 1


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pairs(rows: list[dict[str, Any]], wrong: int, rng: random.Random, spec: Any) -> list[dict]:
    out = []
    for row in rows:
        answer = int(row["answer"])
        others = [n for n in range(spec.max_answer + 1) if n != answer]
        for bad in rng.sample(others, wrong):
            prefix = f"{spec.filler_word} " if rng.random() < 0.5 else ""
            out.append(
                {
                    "prompt": row["prompt"],
                    "chosen": f"{prefix}{answer}",
                    "rejected": f"{prefix}{bad}",
                    "data_source": "default_task",
                }
            )
    return out


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def default_pair_files() -> tuple[Path, Path]:
    """``(train.jsonl, val.jsonl)`` of the default task's pairs (built on first use)."""
    from hfsdk import ensure_default_assets

    assets = ensure_default_assets()
    folder = assets.root / f"preference_pairs_v{_VERSION}"
    train, val = folder / "train.jsonl", folder / "val.jsonl"
    if train.is_file() and val.is_file():
        return train, val
    folder.mkdir(parents=True, exist_ok=True)
    val_rows = _read(assets.val_jsonl)
    held_out = {r["prompt"] for r in val_rows}
    train_rows = [r for r in _read(assets.train_jsonl) if r["prompt"] not in held_out]
    rng = random.Random(assets.spec.seed)
    _write(val, _pairs(val_rows, WRONG_PER_VAL_PROMPT, rng, assets.spec))
    _write(train, _pairs(train_rows, WRONG_PER_TRAIN_PROMPT, rng, assets.spec))
    return train, val


def train_files() -> list[str]:
    """The default pairs' training file (a deferred preset value)."""
    return [str(default_pair_files()[0])]


def val_files() -> list[str]:
    """The default pairs' held-out file (a deferred preset value)."""
    return [str(default_pair_files()[1])]
