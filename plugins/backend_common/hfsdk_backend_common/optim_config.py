"""The optimizer section every training backend's role config shares (``<role>.optim``)."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk import help_field


def _betas(value: object) -> tuple[float, float]:
    """Accept a YAML list for ``betas``."""
    pair = tuple(float(v) for v in value)  # type: ignore[union-attr]
    if len(pair) != 2 or not all(0.0 <= b < 1.0 for b in pair):
        raise ValueError(f"'betas' is {value!r}; expected two numbers in [0, 1), e.g. [0.9, 0.999]")
    return pair  # type: ignore[return-value]


@attrs.frozen(kw_only=True)
class OptimConfig:
    """AdamW with linear warmup, then a constant or cosine learning rate.

    The schedule counts training iterations (one per ``update_actor`` /
    ``update_critic`` call), not optimizer steps. ``cosine`` decays from ``lr``
    to ``lr · min_lr_ratio`` over ``total_steps`` (the trainer fills it from its
    own step count when left at 0).
    """

    lr: float = help_field(
        "Peak learning rate of AdamW.",
        default=1e-5,
        validator=attrs.validators.gt(0.0),
    )
    betas: tuple[float, float] = help_field(
        "AdamW's (β1, β2).",
        default=(0.9, 0.999),
        converter=_betas,
    )
    eps: float = help_field(
        "AdamW's ε.",
        default=1e-8,
        validator=attrs.validators.gt(0.0),
    )
    weight_decay: float = help_field(
        "Decoupled weight decay (AdamW).",
        default=0.0,
        validator=attrs.validators.ge(0.0),
    )
    warmup_steps: int = help_field(
        "Training iterations of linear warm-up from 0 to lr.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    lr_schedule: Literal["constant", "cosine"] = help_field(
        "After warm-up: constant, or cosine decay to lr·min_lr_ratio over total_steps.",
        default="constant",
        validator=attrs.validators.in_(("constant", "cosine")),
    )
    min_lr_ratio: float = help_field(
        "Cosine schedule: final lr as a fraction of lr.",
        default=0.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)],
    )
    total_steps: int = help_field(
        "Cosine schedule length in training iterations; 0: trainer.total_steps.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    grad_clip: float = help_field(
        "Clip the gradient's global L2 norm to this value.",
        default=1.0,
        validator=attrs.validators.gt(0.0),
    )
