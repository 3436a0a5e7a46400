"""The optimizer section every training backend's role config shares (``<role>.optim``)."""

from __future__ import annotations

from typing import Any, Literal

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
    towards ``lr · min_lr_ratio`` over ``total_steps`` (the trainer fills it from its
    own step count when left at 0), reaching it one step after the last update.
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
    decay_norms_and_biases: bool = help_field(
        "Apply weight_decay to 1-D parameters (norm gains, biases) too, as verl does; "
        "false: only to matrices, as TRL (transformers' Trainer), OpenRLHF and megatron-core do.",
        default=True,
    )
    warmup_steps: int = help_field(
        "Training iterations of linear warm-up: iteration s (from 0) trains at "
        "lr·(s+1)/warmup_steps.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    lr_schedule: Literal["constant", "cosine"] = help_field(
        "After warm-up: constant, or cosine decay towards lr·min_lr_ratio over total_steps.",
        default="constant",
        validator=attrs.validators.in_(("constant", "cosine")),
    )
    min_lr_ratio: float = help_field(
        "Cosine schedule: the lr decays towards lr·min_lr_ratio, reached one step after the "
        "last of total_steps updates (as transformers' cosine schedule).",
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


def _cosine_problem(role: str, optim: OptimConfig, trainer_steps: int) -> str | None:
    """One line when ``role``'s cosine schedule has no step left after its warm-up."""
    steps = optim.total_steps or trainer_steps
    if optim.lr_schedule != "cosine" or steps > optim.warmup_steps:
        return None
    source = f"{role}.optim.total_steps" if optim.total_steps else "trainer.total_steps"
    return (
        f"{role}.optim.lr_schedule is 'cosine' but its length {source}={steps} is not above "
        f"{role}.optim.warmup_steps={optim.warmup_steps}; raise {source}, lower warmup_steps "
        "or use lr_schedule: constant"
    )


def schedule_problems(config: Any) -> list[str]:
    """Cosine schedules of trained roles whose warm-up fills the run, refused with the config.

    ``build_scheduler`` refuses them too, but only inside a worker, after the run started.
    """
    from hfsdk import TRAINED_KINDS, run_spec

    problems = []
    for role in run_spec(config).roles:
        optim = getattr(config.sections.get(role.name), "optim", None)
        if role.kind not in TRAINED_KINDS or not isinstance(optim, OptimConfig):
            continue
        problem = _cosine_problem(role.name, optim, config.trainer.total_steps)
        if problem:
            problems.append(problem)
    return problems
