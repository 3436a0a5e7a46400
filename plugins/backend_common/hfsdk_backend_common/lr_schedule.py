"""Learning-rate schedule: linear warmup, then constant or cosine decay."""

from __future__ import annotations

import math
from typing import Any

import attrs
import torch

from hfsdk import HfsdkError
from hfsdk_backend_common.optim_config import OptimConfig

_FUSED_ADAMW_DEVICES = ("cpu", "cuda")
"""Where ``torch.optim.AdamW(fused=True)`` has a kernel (torch also has it for a few more)."""


@attrs.define(frozen=True, slots=False)
class LRMultiplier:
    """The factor on the base learning rate after ``step`` scheduler steps.

    A callable object rather than a closure: ``LambdaLR`` saves its fields in
    the scheduler's state dict (hence ``slots=False``), so a resumed run keeps them.
    """

    warmup_steps: int
    schedule: str
    total_steps: int
    min_lr_ratio: float

    def __call__(self, step: int) -> float:
        """Warmup from ``1/warmup_steps`` up to 1, then 1 or a cosine down to ``min_lr_ratio``."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return 1.0
        decay_steps = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / decay_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine


def build_scheduler(
    optimizer: torch.optim.Optimizer, config: OptimConfig, total_steps: int | None = None
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` for ``config``; ``total_steps`` fills ``config.total_steps`` if that is 0."""
    steps = config.total_steps or (total_steps or 0)
    if config.lr_schedule == "cosine" and steps <= config.warmup_steps:
        raise HfsdkError(
            f"optim.lr_schedule is 'cosine' but total_steps={steps} is not above "
            f"warmup_steps={config.warmup_steps}; set optim.total_steps (or trainer.total_steps) "
            "to the number of training steps, or use lr_schedule: constant"
        )
    multiplier = LRMultiplier(
        warmup_steps=config.warmup_steps,
        schedule=config.lr_schedule,
        total_steps=steps,
        min_lr_ratio=config.min_lr_ratio,
    )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)


def build_optimizer(
    parameters: Any, optim: OptimConfig, total_steps: int | None
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """AdamW over ``parameters`` with the role's ``optim`` settings, and its LR schedule.

    The step runs as torch's fused kernel where every parameter's device has one: on CPU
    torch otherwise steps one parameter at a time (the compute-bound benchmark model's
    step: 92 ms one at a time, 9 ms fused, 2-core machine; docs/backends.md).
    """
    parameters = list(parameters)
    fused = all(p.is_floating_point() and p.device.type in _FUSED_ADAMW_DEVICES for p in parameters)
    optimizer = torch.optim.AdamW(
        parameters,
        lr=optim.lr,
        betas=optim.betas,
        eps=optim.eps,
        weight_decay=optim.weight_decay,
        fused=True if fused else None,
    )
    return optimizer, build_scheduler(optimizer, optim, total_steps)
