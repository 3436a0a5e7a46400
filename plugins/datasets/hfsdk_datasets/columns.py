"""The columns a reward function sees, including verl's nested ``reward_model`` layout.

verl's preprocessing scripts write rows like::

    {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "..."}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"},
     "extra_info": {"split": "train", "index": 0}}

Every column reaches reward functions under its own name; ``reward_model.ground_truth``
is also lifted to a top-level ``ground_truth`` column (the name verl's
``compute_score``, TRL-style ``**kwargs`` functions and OpenRLHF labels use),
unless the dataset already has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hfsdk import HIDDEN_COLUMNS, INTERNAL_COLUMNS


def lift_nested(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` plus ``ground_truth`` taken from verl's ``reward_model`` struct when present."""
    out = dict(row)
    nested = row.get("reward_model")
    if isinstance(nested, Mapping) and "ground_truth" not in row:
        truth = nested.get("ground_truth")
        if truth is not None:
            out["ground_truth"] = truth
    return out


def reward_column_names(row: Mapping[str, Any]) -> list[str]:
    """The column names a reward function with ``**kwargs`` will see for a loaded row."""
    return sorted(k for k in row if k not in HIDDEN_COLUMNS | INTERNAL_COLUMNS)
