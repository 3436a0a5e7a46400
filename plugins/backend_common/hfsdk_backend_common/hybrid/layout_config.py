"""``actor.rollout_layout``: the generation layout a backend asks the engine for.

``{tp: tg, pp: pg}``; ``tp`` defaults to the training tensor-parallel size and
``pp`` to 1 (the paper's choice: generation prefers no pipeline; pg > 1 trades
decoding speed for a smaller generation shard per rank). With
``placement.mode: auto`` the planner's choice for the actor wins when the
engine can regroup the training layout into it.
"""

from __future__ import annotations

import logging

import attrs

from hfsdk import HfsdkError, help_field
from hfsdk_backend_common.hybrid.layout import (
    GenLayout,
    HeadShape,
    TrainLayout,
    generation_layout,
    validate,
)

logger = logging.getLogger(__name__)


def _optional_positive(_inst: object, attr: attrs.Attribute, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise HfsdkError(
            f"rollout_layout.{attr.name}={value!r}; expected a positive integer (or leave it "
            "unset for the default)"
        )


@attrs.frozen(kw_only=True)
class RolloutLayoutConfig:
    """The actor's generation layout: ``tp`` (default: training tp) and ``pp`` (default 1)."""

    tp: int | None = help_field(
        "Generation tensor-parallel size tg (must divide the training tp of a tensor-parallel "
        "actor; at most the actor's ranks otherwise); null: the training tp.",
        default=None,
        validator=_optional_positive,
    )
    pp: int = help_field(
        "Generation pipeline size pg (must divide the training pp); 1: no generation pipeline.",
        default=1,
        validator=_optional_positive,
    )
    planned_tp: int | None = help_field(
        "Set by the session under placement.mode=auto: the planner's rollout tp.",
        default=None,
        validator=_optional_positive,
    )
    """Set by the session under ``placement.mode: auto``: the planner's rollout tp
    (taken when the training layout can regroup into it, else ``tp``/``pp``)."""


def resolve_rollout_layout(
    train: TrainLayout,
    config: RolloutLayoutConfig,
    shape: HeadShape,
    *,
    planned_tp: int | None = None,
) -> GenLayout:
    """The generation layout to use, validated against ``train`` and the model's heads.

    ``planned_tp`` is the planner's rollout tensor-parallel size
    (``placement.mode: auto``); it is taken when valid for ``train``, otherwise
    the configured layout is used and the reason logged. A configured layout
    that does not fit raises a one-line :class:`HfsdkError` naming both layouts.
    """
    if planned_tp is not None:
        try:
            gen = generation_layout(train, tp=planned_tp, pp=1)
            validate(train, gen, shape)
        except HfsdkError as error:
            logger.warning("placement: auto's rollout layout is not usable here: %s", error)
        else:
            return gen
    gen = generation_layout(train, tp=config.tp or train.t, pp=config.pp)
    validate(train, gen, shape)
    return gen
