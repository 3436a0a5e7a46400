"""DAPO's preflight check: dynamic sampling is refused for image prompts before any worker starts.

Dynamic sampling joins the kept groups of several generation rounds into one batch. An image
row carries its images as per-row tensor columns padded to its own round's widest row
(``hfsdk_vision.batch_images``), so two rounds whose images differ in size or count cannot be
joined: the run used to fail at a later step with a tensor-shape error, after the workers had
started. Rounds of equal widths would join, but which prompts a round draws is not known
ahead, so every image run with dynamic sampling is refused.
"""

from __future__ import annotations

from typing import Any

from hfsdk import HfsdkError

NAME = "dapo_dynamic_sampling"
"""The preflight registry name of :func:`dynamic_sampling_check`."""

IMAGES = "images"
"""The column of a row's images (the vision plugin's ``hf_vision`` rollout reads it)."""


def _has_images(rows: Any) -> bool:
    """Whether any row carries at least one image in the ``images`` column."""
    return any(row.get(IMAGES) is not None and len(row[IMAGES]) for row in rows)


def dynamic_sampling_check(config: Any, spec: Any, prepared: Any) -> str | None:
    """Refuse a DAPO run with ``algorithm.dynamic_sampling`` whose training rows carry images."""
    from hfsdk_dapo.dapo_algorithm import DAPOAlgorithm

    if not issubclass(spec.program, DAPOAlgorithm) or not config.algorithm.dynamic_sampling:
        return None
    if IMAGES not in prepared.row_columns or not _has_images(prepared.loader.rows):
        return None
    raise HfsdkError(
        f"algorithm.dynamic_sampling=true with image prompts (column {IMAGES!r}) is not "
        "supported: refill rounds whose images differ in size or count cannot be joined into "
        "one batch; set algorithm.dynamic_sampling=false (or use grpo)"
    )
