"""The vision tower of an image-text model, found by the names transformers' classes give it.

transformers' vision-language models keep their image encoder under one submodule whose
name says so: ``visual`` (Qwen2-VL, Qwen2.5-VL), ``vision_tower`` (LLaVA, Gemma 3, Mistral 3),
``vision_model`` (Idefics, SmolVLM, Mllama). ``actor.freeze_vision`` freezes the parameters
under it; a model with none of them is refused in one line rather than trained whole.
"""

from __future__ import annotations

from typing import Any

from hfsdk import HfsdkError

VISION_TOWER_NAMES = ("visual", "vision_tower", "vision_model")
"""Submodule names of the image encoders of transformers' vision-language models."""


def freeze_vision_tower(model: Any, key: str) -> int:
    """Stop the gradient of every parameter under ``model``'s vision tower; returns how many
    elements were frozen. ``key`` (``actor.freeze_vision``) names the setting in the error."""
    frozen = 0
    for name, parameter in model.named_parameters():
        if any(part in VISION_TOWER_NAMES for part in name.split(".")[:-1]):
            parameter.requires_grad_(False)
            frozen += parameter.numel()
    if not frozen:
        raise HfsdkError(
            f"{key}=true but {type(model).__name__} has no vision tower (no parameter under a "
            f"submodule named {', '.join(VISION_TOWER_NAMES)}); set {key}: false for a "
            "text-only model"
        )
    return frozen
