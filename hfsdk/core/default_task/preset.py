"""Settings under which the built-in default task learns within a short CPU run.

The generic config defaults suit real models; the default task's model is
tiny, so it needs a larger learning rate and short responses. When a run names
no training data (``data.train_files`` empty), these values are merged *under*
the user's config: anything the user sets still wins. ``hfsdk config show``
prints the result.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

_COMMON: dict[str, Any] = {
    "trainer": {"total_steps": 30},
    "data": {"batch_size": 16},
    "rollout": {"max_response_length": 8},
    "actor": {"optim": {"lr": 1e-4}, "mini_batch_size": 8, "micro_batch_size": 16},
}
_CRITIC = {"optim": {"lr": 1e-3}, "mini_batch_size": 8, "micro_batch_size": 16}

_PER_ALGORITHM: dict[str, dict[str, Any]] = {
    # 16 prompts x 4 samples: two optimizer steps of 32 responses per iteration.
    "grpo": {"actor": {"mini_batch_size": 32, "micro_batch_size": 64}},
    "ppo": {"critic": _CRITIC},
    # One sample per prompt is too noisy against a greedy baseline; four are not.
    "remax": {
        "algorithm": {"n_samples_per_prompt": 4},
        "actor": {"mini_batch_size": 32, "micro_batch_size": 64},
    },
    "safe_rlhf": {
        "critic": _CRITIC,
        "cost_critic": _CRITIC,
        "algorithm": {"cost_threshold": 0.1, "lambda_lr": 0.5},
    },
}


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` on top, recursively (``override`` wins)."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def default_task_preset(algo: str) -> dict[str, Any]:
    """The default task's settings for ``algo`` (a nested config dict)."""
    return deep_merge(_COMMON, _PER_ALGORITHM.get(algo, {}))


def uses_default_task(data: Mapping[str, Any]) -> bool:
    """Whether a raw config names no training data (so the default task runs)."""
    section = data.get("data") or {}
    return not (isinstance(section, Mapping) and section.get("train_files"))


# The preset's sections are written for these backends (the first is the default); a
# section that selects another backend takes none of them (their keys would not exist
# there). The vllm rollout shares the hf rollout's keys, megatron the fsdp batch/optim keys.
_PRESET_BACKENDS = {
    "rollout": ("hf", "vllm"),
    "actor": ("fsdp", "megatron"),
    "critic": ("fsdp", "megatron"),
    "cost_critic": ("fsdp", "megatron"),
}


def with_default_task_preset(algo: str | None, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` on top of the preset when it runs the default task, else ``data`` unchanged."""
    if not algo or not uses_default_task(data):
        return dict(data)
    preset = default_task_preset(algo)
    for section, backends in _PRESET_BACKENDS.items():
        given = data.get(section)
        if isinstance(given, Mapping) and given.get("backend", backends[0]) not in backends:
            preset.pop(section, None)
    return deep_merge(preset, data)
