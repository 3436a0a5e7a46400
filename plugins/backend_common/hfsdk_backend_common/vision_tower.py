"""The vision tower of an image-text model, found by the names transformers' classes give it.

transformers' vision-language models keep their image encoder under one submodule whose
name says so: ``visual`` (Qwen2-VL, Qwen2.5-VL), ``vision_tower`` (LLaVA, Gemma 3, Mistral 3),
``vision_model`` (Idefics, SmolVLM, Mllama). ``actor.freeze_vision`` freezes the parameters
under it; a model with none of them is refused in one line rather than trained whole.
LoRA adapters are never put inside it (:func:`vision_tower_modules`).
"""

from __future__ import annotations

from typing import Any

from hfsdk import HfsdkError

VISION_TOWER_NAMES = ("visual", "vision_tower", "vision_model")
"""Submodule names of the image encoders of transformers' vision-language models."""


def in_vision_tower(name: str) -> bool:
    """Whether the module or parameter ``name`` lies inside a vision tower (or is one)."""
    return any(part in VISION_TOWER_NAMES for part in name.split("."))


def vision_tower_modules(model: Any) -> list[str]:
    """The names of ``model``'s vision towers (outermost only; empty for a text-only model)."""
    return [
        name
        for name, _ in model.named_modules()
        if name.rsplit(".", 1)[-1] in VISION_TOWER_NAMES
        and not in_vision_tower(name.rsplit(".", 1)[0] if "." in name else "")
    ]


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
