"""verl's vision-language keys: the images column, the frozen vision tower, the image rollout.

A verl config trains a vision-language model when its model is one (the path names a
``*-VL-*`` model, or the model directory here has a ``vision_config``), when its train
files here carry the images column, or when it freezes the vision tower. verl's
``data.image_key`` alone says nothing: its default (``images``) is in every composed verl
config, text ones included.

Such a config gets ``rollout.backend: hf_vision`` (the vision plugin's rollout; hfsdk's vLLM
rollout has no image path and a run with images refuses it), and
``actor_rollout_ref.actor.freeze_vision_tower`` becomes ``actor.freeze_vision``. This module
only writes keys: whether the vision plugin is installed is read from the rollout registry.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hfsdk_migration.importing.mapper import Mapper

A = "actor_rollout_ref.actor."
R = "actor_rollout_ref.rollout."
M = "actor_rollout_ref.model."
IMAGES = "images"
"""The column hfsdk reads a row's images from (verl's default ``data.image_key``)."""
BACKEND = "hf_vision"
ON = (True, "true", "True")
"""A verl switch that is on (Hydra gives a bool; a YAML may hold the string)."""
VL_NAME = re.compile(r"(^|[-_])vl([-_.]|$)", re.IGNORECASE)
"""A model name's ``VL`` part: ``Qwen2.5-VL-7B-Instruct``, ``Qwen2-VL-2B``, ``Qwen3-VL-8B``."""
ENGINE_KEYS = (
    "gpu_memory_utilization",
    "max_num_seqs",
    "enforce_eager",
    "free_cache_engine",
    "dtype",
)
"""verl rollout settings of its inference engine, which the image rollout does not have."""
_ENGINE_REASON = (
    "a vLLM engine setting: with images hfsdk generates with transformers on the actor's "
    f"weights (rollout.backend={BACKEND})"
)


def is_vision(m: Mapper) -> bool:
    """Whether the verl config in ``m`` trains a vision-language model (see the module doc)."""
    path = m.flat.get(M + "path")
    if path is not None and _is_vl_model(str(path)):
        return True
    if m.flat.get(A + "freeze_vision_tower") in ON:
        return True
    return _files_have_column(m.flat.get("data.train_files"), _image_key(m))


def _image_key(m: Mapper) -> str:
    key = m.flat.get("data.image_key")
    return IMAGES if key is None else str(key)


def _is_vl_model(path: str) -> bool:
    """A ``*-VL-*`` name, or a local model directory whose config has a vision tower."""
    config = Path(path).expanduser() / "config.json"
    if config.is_file():
        try:
            return "vision_config" in json.loads(config.read_text())
        except (OSError, ValueError):
            return False  # not ours to judge: the run reports an unreadable model directory
    return any(VL_NAME.search(part) for part in Path(path).parts[-2:])


def _files_have_column(files: Any, column: str) -> bool:
    """Whether a train parquet file here has ``column`` (files not here say nothing)."""
    if files is None:
        return False
    names = [files] if isinstance(files, str) else [str(f) for f in files]
    for name in names:
        path = Path(name).expanduser()
        if path.suffix == ".parquet" and path.is_file():
            import pyarrow.parquet as pq

            if column in pq.read_schema(path).names:
                return True
    return False


def map_image_key(m: Mapper) -> None:
    """``data.image_key``: ``images`` is hfsdk's column; another name is listed."""
    key = m.get("data.image_key")
    if key is not None and str(key) != IMAGES:
        m.reject(
            "data.image_key",
            f"hfsdk reads a row's images from the column {IMAGES!r} only; rename the column "
            f"{key!r} to {IMAGES!r} in the parquet files",
        )


def map_freeze_vision(m: Mapper, backend: str, fields: set[str]) -> None:
    """``actor.freeze_vision_tower`` -> ``actor.freeze_vision`` where the backend has it."""
    key = A + "freeze_vision_tower"
    if m.get(key) not in ON:
        return  # off (verl's default in every composed config): hfsdk's default too
    if "freeze_vision" in fields:
        m.put("actor.freeze_vision", True)
    else:
        m.reject(key, f"the {backend} backend has no actor.freeze_vision (the fsdp backend has)")


def map_vision_rollout(m: Mapper, backends: set[str]) -> None:
    """The rollout section of a vision-language config: ``rollout.backend: hf_vision``.

    The image rollout samples with ``generate`` at a temperature (no top-k/top-p) on the
    actor's module, so verl's engine settings and generation tensor parallelism are listed.
    """
    if m.has(R + "temperature"):
        m.put("rollout.temperature", m.num(R + "temperature"))
    for key, off in (("top_p", 1.0), ("top_k", 0.0)):
        value = m.num(R + key)
        if value is not None and value != off and not (key == "top_k" and value < 0):
            m.reject(R + key, f"rollout.backend={BACKEND} samples at a temperature only")
    name = m.get(R + "name")
    if BACKEND in backends:
        m.put("rollout.backend", BACKEND)
    elif name is not None:
        m.reject(
            R + "name",
            f"a vision-language model: install hfsdk-plugin-vision for rollout.backend={BACKEND}",
        )
    for key in ENGINE_KEYS:
        value = m.flat.get(R + key)
        if value not in (None, False):
            m.reject(R + key, _ENGINE_REASON)
        elif value is False:
            m.get(R + key)  # off: nothing of it to carry over
    tp = R + "tensor_model_parallel_size"
    if m.has(tp) and m.int(tp) != 1:
        m.reject(
            tp,
            f"rollout.backend={BACKEND} generates on the actor's module without tensor parallelism",
        )
