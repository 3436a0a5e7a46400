"""The columns a reward function sees, including verl's nested ``reward_model`` layout.

verl's preprocessing scripts write rows like::

    {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "..."}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"},
     "extra_info": {"split": "train", "index": 0}}

Every column reaches reward functions under its own name; ``reward_model.ground_truth``
is also lifted to a top-level ``ground_truth`` column (the name verl's
``compute_score``, TRL-style ``**kwargs`` functions and OpenRLHF labels use) in every
row, ``None`` where it is absent, unless the row already has a ``ground_truth`` value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hfsdk import HIDDEN_COLUMNS, INTERNAL_COLUMNS


def lift_nested(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` plus ``ground_truth`` taken from verl's ``reward_model`` struct.

    A row with a ``reward_model`` column always gets ``ground_truth`` (``None`` where the
    struct holds none): every row of a dataset has the same columns, and a batch needs one
    value per row. A top-level ``ground_truth`` wins unless it is ``None`` (a file joined
    with one that has the column).
    """
    out = dict(row)
    if "reward_model" not in row or row.get("ground_truth") is not None:
        return out
    nested = row["reward_model"]
    out["ground_truth"] = nested.get("ground_truth") if isinstance(nested, Mapping) else None
    return out


def reward_column_names(row: Mapping[str, Any]) -> list[str]:
    """The column names a reward function with ``**kwargs`` will see for a loaded row."""
    return sorted(k for k in row if k not in HIDDEN_COLUMNS | INTERNAL_COLUMNS)
