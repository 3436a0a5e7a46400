"""The ``reward`` / ``cost`` sections: where a scalar signal per sample comes from."""

from __future__ import annotations

from typing import Any, Literal

import attrs


@attrs.frozen(kw_only=True)
class SignalFunction:
    """A registered reward function (by name, ``module:function`` or ``file.py:function``)."""

    name: str
    weight: float = 1.0
    kwargs: dict[str, Any] = attrs.field(factory=dict)
    """Keyword arguments for the function's config class (or the function itself)."""
    style: Literal["hfsdk", "verl", "trl", "openrlhf"] | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(
            attrs.validators.in_(("hfsdk", "verl", "trl", "openrlhf"))
        ),
    )
    """Calling convention: ``None`` recognises it by the function's parameters."""


@attrs.frozen(kw_only=True)
class SignalConfig:
    """A reward or cost signal: a weighted sum of functions, and/or a scoring model.

    ``model`` is a role section (its ``backend`` picks the config class, like
    ``actor``); when both are given the model's score is added to the functions'.
    With neither, the built-in default task supplies its rule-based signal.
    """

    functions: tuple[SignalFunction, ...] = ()
    model: Any = None
