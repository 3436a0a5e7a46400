"""Configuration of the trainer loop (steps, seeds, logging, checkpoints)."""

from __future__ import annotations

from typing import Literal

import attrs

LOGGERS = ("console", "jsonl", "tensorboard", "wandb")


def _check_loggers(_inst: object, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    for name in value:
        if name not in LOGGERS:
            raise ValueError(f"'{attribute.name}' has unknown logger {name!r}; allowed: {LOGGERS}")


@attrs.frozen(kw_only=True)
class TrainerConfig:
    """How long to train, how to log, when to validate and checkpoint."""

    total_steps: int = attrs.field(default=30, validator=attrs.validators.ge(1))
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "cpu", "cuda"))
    )
    loggers: tuple[str, ...] = attrs.field(default=("console", "jsonl"), validator=_check_loggers)
    save_every: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    """Checkpoint every N steps (0: only at the end)."""
    val_every: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    """Validate (greedy generation on the validation set) every N steps (0: never)."""
    resume: bool = True
    """Resume from the newest checkpoint in the run directory if there is one."""
    ray_address: str | None = None
    """Join this Ray cluster instead of starting a local one (also ``RAY_ADDRESS``)."""
    worker_timeout_s: float = attrs.field(default=600.0, validator=attrs.validators.gt(0.0))
    worker_threads: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    """Intra-op threads of each worker process (0: auto, the node's cores divided by the
    device slots on it, capped by ``OMP_NUM_THREADS`` when the controller has it set)."""
