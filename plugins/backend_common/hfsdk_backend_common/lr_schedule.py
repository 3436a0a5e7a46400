"""Learning-rate schedule: linear warmup, then constant or cosine decay."""

from __future__ import annotations

import logging
import math
from typing import Any

import attrs
import torch

from hfsdk import HfsdkError
from hfsdk_backend_common.optim_config import OptimConfig

logger = logging.getLogger(__name__)

_FUSED_ADAMW_DEVICES = ("cpu", "cuda")
"""Where ``torch.optim.AdamW(fused=True)`` has a kernel (torch also has it for a few more)."""


@attrs.define(frozen=True, slots=False)
class LRMultiplier:
    """The factor on the base learning rate after ``step`` scheduler steps.

    A callable object rather than a closure: ``LambdaLR`` saves its fields in the
    scheduler's state dict (hence ``slots=False``); :class:`ConfiguredSchedule` reads
    them back only to say when the run's config changed them.
    """

    warmup_steps: int
    schedule: str
    total_steps: int
    min_lr_ratio: float

    def __call__(self, step: int) -> float:
        """Warmup from ``1/warmup_steps`` up to 1, then 1 or a cosine towards ``min_lr_ratio``.

        The cosine is transformers' ``get_cosine_schedule_with_warmup``: ``step ==
        warmup_steps`` is still 1 (the peak serves two updates) and ``min_lr_ratio`` is
        reached at ``step == total_steps``, one after the last of ``total_steps`` updates
        (which trains at about 0.23 for warmup 2, ratio 0.1, 6 updates).
        """
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return 1.0
        decay_steps = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / decay_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine


class ConfiguredSchedule(torch.optim.lr_scheduler.LambdaLR):
    """A ``LambdaLR`` whose shape is always the run's config, also after a resume.

    A checkpoint gives the step count; the multiplier's fields (a cosine's length filled
    from ``trainer.total_steps``) stay the config's. Restoring the saved ones made a run
    extended on resume from 2 to 4 steps train steps 3 and 4 at the end of a 2-step
    cosine (lr 0). The optimizer's learning rates are set from the config's schedule
    again, so an unchanged schedule resumes bit for bit.
    """

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """The saved step count; the base learning rates and multipliers stay this config's."""
        saved = list(state_dict.get("lr_lambdas") or [])
        # torch restores the saved base_lrs too: a checkpoint's peak lr would outlive the
        # config's (the engine's apply_optim_config says when they differed).
        configured = list(self.base_lrs)
        super().load_state_dict({**state_dict, "lr_lambdas": [None] * len(saved)})
        self.base_lrs = configured
        for multiplier, fields in zip(self.lr_lambdas, saved, strict=False):
            if fields and isinstance(multiplier, LRMultiplier) and _differ(multiplier, fields):
                logger.warning(
                    "the learning-rate schedule resumes with this run's %s (the checkpoint's "
                    "was %s): the steps already trained followed the old one",
                    attrs.asdict(multiplier),
                    fields,
                )
        # What step() would set at this step count (get_lr() outside step() makes torch warn).
        factors = [multiplier(self.last_epoch) for multiplier in self.lr_lambdas]
        self._last_lr = [base * f for base, f in zip(self.base_lrs, factors, strict=True)]
        for group, lr in zip(self.optimizer.param_groups, self._last_lr, strict=True):
            group["lr"] = lr


def _differ(multiplier: LRMultiplier, fields: dict[str, Any]) -> bool:
    """Whether the saved multiplier's factors differ from ``multiplier``'s at any step
    either could reach (a constant schedule's length changes nothing)."""
    if attrs.asdict(multiplier) == fields:
        return False
    try:
        old = LRMultiplier(**fields)
    except TypeError:  # another layout of fields: say it changed
        return True
    steps = max(old.total_steps, multiplier.total_steps, old.warmup_steps) + 1
    return any(old(step) != multiplier(step) for step in range(steps))


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
    return ConfiguredSchedule(optimizer, multiplier)


def build_optimizer(
    parameters: Any, optim: OptimConfig, total_steps: int | None
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """AdamW over ``parameters`` with the role's ``optim`` settings, and its LR schedule.

    With ``optim.decay_norms_and_biases`` false the 1-D parameters (norm gains, biases)
    form a second group without weight decay.

    The step runs as torch's fused kernel where every parameter's device has one: on CPU
    torch otherwise steps one parameter at a time (the compute-bound benchmark model's
    step: 92 ms one at a time, 9 ms fused, 2-core machine; docs/backends.md).
    """
    parameters = list(parameters)
    fused = all(p.is_floating_point() and p.device.type in _FUSED_ADAMW_DEVICES for p in parameters)
    optimizer = torch.optim.AdamW(
        _param_groups(parameters, optim),
        lr=optim.lr,
        betas=optim.betas,
        eps=optim.eps,
        weight_decay=optim.weight_decay,
        fused=True if fused else None,
    )
    return optimizer, build_scheduler(optimizer, optim, total_steps)


def _param_groups(parameters: list[torch.Tensor], optim: OptimConfig) -> list[dict[str, Any]]:
    """One group, or matrices and (without weight decay) 1-D parameters apart.

    One group when every parameter decays keeps the optimizer state's layout (and so
    older checkpoints) as it was. By dimension rather than by name, like megatron-core:
    the 1-D parameters are the norm gains and biases that TRL and OpenRLHF exclude by
    name, in any model and in any backend's parameter names.
    """
    if optim.decay_norms_and_biases:
        return [{"params": parameters}]
    groups = [
        {"params": [p for p in parameters if p.ndim >= 2]},
        {"params": [p for p in parameters if p.ndim < 2], "weight_decay": 0.0},
    ]
    return [group for group in groups if group["params"]]


def _group_weight_decay(group: dict[str, Any], optim: OptimConfig) -> float:
    """The weight decay :func:`build_optimizer` gave ``group``."""
    if optim.decay_norms_and_biases or all(p.ndim >= 2 for p in group["params"]):
        return optim.weight_decay
    return 0.0


def apply_optim_config(optimizer: torch.optim.Optimizer, optim: OptimConfig) -> None:
    """Set every group's peak lr, betas, eps and weight decay back to ``optim``'s.

    Loading an optimizer state dict restores the saved groups' settings; the run's
    config must win (as the schedule's does), so call this after such a load. One
    warning lists the settings the loaded state had otherwise.
    """
    changed: list[str] = []
    for group in optimizer.param_groups:
        configured: dict[str, Any] = {
            "betas": tuple(optim.betas),
            "eps": optim.eps,
            "weight_decay": _group_weight_decay(group, optim),
        }
        if "initial_lr" in group:  # the scheduler's base lr (group["lr"] is the scheduled one)
            configured["initial_lr"] = optim.lr
        for key, value in configured.items():
            saved = tuple(group[key]) if key == "betas" else group.get(key)
            if saved != value:
                changed.append(f"{'lr' if key == 'initial_lr' else key} {saved} -> {value}")
            group[key] = value
    if changed:
        logger.warning(
            "the loaded optimizer state's settings differ from this run's optim config; "
            "training continues with the config's: %s",
            ", ".join(dict.fromkeys(changed)),
        )
