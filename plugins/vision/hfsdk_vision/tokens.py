"""The vision special tokens of Qwen2-VL-style models and verl's prompt placeholder."""

from __future__ import annotations

VISION_START = "<|vision_start|>"
IMAGE_PAD = "<|image_pad|>"
VISION_END = "<|vision_end|>"
VIDEO_PAD = "<|video_pad|>"
VISION_TOKENS = (VISION_START, IMAGE_PAD, VISION_END, VIDEO_PAD)

IMAGE_PLACEHOLDER = "<image>"
"""How verl's (and LLaVA-style) datasets mark an image's place in the prompt text."""

IMAGE_SPAN = f"{VISION_START}{IMAGE_PAD}{VISION_END}"
"""What a placeholder becomes before the processor expands ``IMAGE_PAD`` to the image's
feature count."""


def expand_placeholders(text: str) -> str:
    """``text`` with each ``<image>`` replaced by the model's vision span (one per image)."""
    return text.replace(IMAGE_PLACEHOLDER, IMAGE_SPAN)
