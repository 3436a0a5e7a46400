"""A run whose prompt + response budget exceeds a model's positions, refused before it starts.

transformers only warns when a sequence outgrows ``max_position_embeddings``; the
worker then allocates for the whole length (51 GB measured). The positions are
read off each local model's ``config.json`` (the HF format every backend loads),
so the check is the backends': registered as the ``model_positions`` preflight check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hfsdk import ConfigError
from hfsdk_backend_common.precision_check import model_sections

_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def model_positions(model_path: str | None) -> tuple[int, str] | None:
    """(positions, the config key) from a local model's ``config.json``; ``None`` if unknown."""
    if not model_path:
        return None
    path = Path(model_path).expanduser() / "config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    for section in (data, data.get("text_config") if isinstance(data, dict) else None):
        if not isinstance(section, Mapping):
            continue
        for key in _POSITION_KEYS:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, key
    return None


def check_model_positions(config: Any, spec: Any, prepared: Any) -> None:
    """Refuse a prompt + response budget beyond the positions of any model the run loads
    (the run's own model defaults to its task's)."""
    prompt = int(config.data.max_prompt_length)
    response, key = config.rollout.response_budget()
    total, parts = prompt + response, f"data.max_prompt_length={prompt} + {key}={response}"
    paths = {
        f"{name}.model_path": getattr(section, "model_path", None)
        for name, section in model_sections(config, spec).items()
    }
    main = f"{spec.main_role}.model_path"
    paths[main] = paths.get(main) or prepared.assets.model_path
    for name, model_path in paths.items():
        found = model_positions(model_path)
        if found is not None and total > found[0]:
            positions, field = found
            raise ConfigError(
                f"{parts} = {total} tokens exceed the {positions} positions of {name} "
                f"({field} in {model_path}/config.json); lower them to {positions} tokens "
                "in all, or use a model with more positions"
            )
