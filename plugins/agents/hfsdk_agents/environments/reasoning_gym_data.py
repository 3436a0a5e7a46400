"""Prompts from one ``reasoning_gym`` task name, generated offline (its datasets are procedural).

:func:`reasoning_gym_rows` turns ``reasoning_gym.create_dataset(name, seed=, size=,
**config)`` into dataset rows: ``prompt`` (the question, after one of reasoning-gym's
format instructions where ``format_instruction`` names one), ``answer`` and what the
``reasoning_gym`` reward needs to rebuild the row's entry for the task's own
verifier (``rg_task``, ``rg_seed``, ``rg_size``, ``rg_index``, ``rg_config``) and the
entry as written (``rg_entry``). The same name, seed, size and config give the same
rows on any machine, except for the tasks whose generation depends on Python's hash
seed (``polynomial_multiplication``, ``word_ladder``, ...): set ``PYTHONHASHSEED`` for
those; the reward scores each row's own entry either way.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hfsdk import ConfigError


def task_names() -> list[str]:
    """Every task name ``reasoning_gym`` registers."""
    from hfsdk_agents.environments.extras import require

    return sorted(require("reasoning_gym.factory").DATASETS)


def instruction_prefix(format_instruction: str | None) -> str:
    """reasoning-gym's system prompt ``format_instruction`` (``"default"`` asks for the
    answer in ``<answer>`` tags, which the reward reads) and a blank line; ``""`` for
    ``None`` or ``"none"``. An unknown name is one line."""
    from hfsdk_agents.environments.extras import require

    if format_instruction is None or format_instruction == "none":
        return ""
    prompts = require("reasoning_gym.utils").SYSTEM_PROMPTS
    if format_instruction not in prompts:
        from hfsdk import unknown_name_message

        raise ConfigError(
            unknown_name_message("format instruction", format_instruction, [*prompts, "none"])
            + " (reasoning_gym.utils.SYSTEM_PROMPTS, or none for the bare question)"
        )
    return prompts[format_instruction].strip() + "\n\n"


@functools.lru_cache(maxsize=32)
def _dataset(name: str, seed: int, size: int, config_json: str) -> Any:
    from hfsdk_agents.environments.extras import require

    # require(), not a bare import: without the extra this is the install hint, not an
    # "internal error".
    reasoning_gym = require("reasoning_gym")
    if name not in task_names():
        from hfsdk import unknown_name_message

        raise ConfigError(
            unknown_name_message("reasoning_gym task", name, task_names())
            + " (reasoning_gym.factory.DATASETS)"
        )
    config = json.loads(config_json)
    try:
        return reasoning_gym.create_dataset(name, seed=seed, size=size, **config)
    except (TypeError, ValueError, AssertionError) as err:
        raise ConfigError(
            f"reasoning_gym task {name!r} refused its config {config}: "
            f"{type(err).__name__}: {err}; see the task's config class in reasoning_gym"
        ) from None


def reasoning_gym_dataset(
    name: str, *, seed: int, size: int, config: Mapping[str, Any] | None = None
) -> Any:
    """The ``reasoning_gym`` dataset (built once per arguments); one line for a bad name."""
    return _dataset(name, int(seed), int(size), json.dumps(dict(config or {}), sort_keys=True))


def reasoning_gym_rows(
    name: str,
    *,
    size: int,
    seed: int = 0,
    config: Mapping[str, Any] | None = None,
    format_instruction: str | None = None,
) -> list[dict[str, Any]]:
    """``size`` rows of the task ``name`` (see the module docstring); ``format_instruction``
    (see :func:`instruction_prefix`) goes before each question."""
    # First, so a bad name is refused before the dataset is generated.
    prefix = instruction_prefix(format_instruction)
    dataset = reasoning_gym_dataset(name, seed=seed, size=size, config=config)
    config_json = json.dumps(dict(config or {}), sort_keys=True)
    return [
        {
            "prompt": prefix + entry["question"],
            "answer": str(entry["answer"]),
            "rg_task": name,
            "rg_seed": int(seed),
            "rg_size": int(size),
            "rg_index": index,
            "rg_config": config_json,
            "rg_entry": json.dumps(entry, default=str),
        }
        for index, entry in _entries(name, dataset, config)
    ]


def _entries(name: str, dataset: Any, config: Mapping[str, Any] | None) -> list[tuple[int, Any]]:
    """The dataset's entries; a config reasoning-gym accepts but cannot generate from (it
    builds entries lazily: ``spell_backward`` with no word that long) is one line."""
    try:
        return list(enumerate(dataset))
    except Exception as err:
        raise ConfigError(
            f"reasoning_gym task {name!r} could not generate its entries with config "
            f"{dict(config or {})}: {type(err).__name__}: {err}; loosen the config"
        ) from None


def write_reasoning_gym_data(
    name: str,
    directory: str | Path,
    *,
    train_size: int,
    val_size: int,
    seed: int = 0,
    config: Mapping[str, Any] | None = None,
    format_instruction: str | None = None,
) -> tuple[Path, Path]:
    """``train.jsonl`` and ``val.jsonl`` of the task in ``directory``.

    ``format_instruction`` names the reasoning-gym system prompt each prompt starts with
    (``None``: the bare question; see :func:`instruction_prefix`).

    Validation rows are other questions than the training rows (see
    :func:`validation_rows`). Both are generated before either file is written: a call
    that fails or is interrupted while generating leaves an older pair as it was.
    """
    from hfsdk import write_text_atomic

    for what, size in (("train_size", train_size), ("val_size", val_size)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"{what} {size!r}: give a number of rows >= 1")
    train = reasoning_gym_rows(
        name, size=train_size, seed=seed, config=config, format_instruction=format_instruction
    )
    val = validation_rows(
        name,
        train,
        val_size=val_size,
        seed=seed,
        config=config,
        format_instruction=format_instruction,
    )
    texts = {
        file: "".join(json.dumps(r) + "\n" for r in rows)
        for file, rows in (("train.jsonl", train), ("val.jsonl", val))
    }
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for file, text in texts.items():
        write_text_atomic(directory / file, text)
    return directory / "train.jsonl", directory / "val.jsonl"


def validation_rows(
    name: str,
    train: list[dict[str, Any]],
    *,
    val_size: int,
    seed: int,
    config: Mapping[str, Any] | None = None,
    format_instruction: str | None = None,
) -> list[dict[str, Any]]:
    """``val_size`` rows of the task whose questions are not among ``train``'s prompts
    (written with the same ``format_instruction`` as ``train``).

    reasoning-gym makes entry ``idx`` of seed ``s`` from ``Random(s + idx)``, so the
    candidates come from seed ``seed + len(train)``: their generators are not any training
    entry's (``seed + 1`` was the training set shifted by one). A small task can still
    draw a training question by chance, so those are skipped, among ``len(train) +
    val_size`` candidates; each row keeps its own ``rg_seed``/``rg_size``/``rg_index``, so
    the reward rebuilds its entry. Fewer unseen questions than ``val_size`` is one line.
    """
    candidates = reasoning_gym_rows(
        name,
        size=len(train) + val_size,
        seed=seed + len(train),
        config=config,
        format_instruction=format_instruction,
    )
    seen = {row["prompt"] for row in train}
    rows = [row for row in candidates if row["prompt"] not in seen][:val_size]
    if len(rows) < val_size:
        raise ConfigError(
            f"reasoning_gym task {name!r}: only {len(rows)} of {len(candidates)} validation "
            f"candidates are questions not in the {len(train)} training rows, fewer than "
            f"val_size {val_size}; lower val_size or train_size, or widen the config"
        )
    return rows
