"""The ``reward`` / ``cost`` sections: where a scalar signal per sample comes from."""

from __future__ import annotations

from typing import Any

import attrs

from hfsdk.core.config.help import help_field
from hfsdk.core.config.paths import absolute_file_spec


@attrs.frozen(kw_only=True)
class SignalFunction:
    """A registered reward function (by name, ``module:function`` or ``file.py:function``)."""

    name: str | None = help_field(
        "Registered reward function, 'package.module:function' or 'path/to/file.py:function'; "
        "null with url: the remote endpoint.",
        default=None,
        converter=absolute_file_spec,
    )
    url: str | None = help_field(
        "An HTTP reward endpoint instead of a function (the 'remote' function with this url).",
        default=None,
    )
    weight: float = help_field(
        "Multiplier of this function's score in the signal's sum.", default=1.0
    )
    kwargs: dict[str, Any] = help_field(
        "Settings of the function (its registered config class checks them).", factory=dict
    )
    style: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    """Calling convention: ``hfsdk`` or a registered reward call style (``hfsdk list
    reward-styles``: verl, trl, openrlhf with hfsdk-plugin-migration), checked when the
    functions are loaded; ``None`` recognises it by the function's parameters."""

    def __attrs_post_init__(self) -> None:
        if self.name is None and self.url is None:
            raise ValueError("a reward function needs a 'name' (or a 'url' of an endpoint)")
        if self.url is not None and self.name not in (None, "remote"):
            raise ValueError(
                f"name={self.name!r} and url={self.url!r}: give one of them (url means the "
                "'remote' function)"
            )


@attrs.frozen(kw_only=True)
class SignalConfig:
    """A reward or cost signal: a weighted sum of functions, and/or a scoring model.

    ``model`` is a role section (its ``backend`` picks the config class, like
    ``actor``); when both are given the model's score is added to the functions'.
    With neither, the built-in default task supplies its rule-based signal.
    """

    functions: tuple[SignalFunction, ...] = help_field(
        "Scoring functions summed with their weights: [{name: exact_match, weight: 1.0, "
        "kwargs: {...}}]; names from hfsdk list reward-functions, or 'module:function' / "
        "'file.py:function'.",
        default=(),
    )
    model: Any = help_field(
        "A scoring model section ({model_path: DIR, backend: ...}) added to the functions' "
        "score; null for none.",
        default=None,
    )
    timeout_s: float = help_field(
        "Seconds one call of a scoring function (a whole batch) may take; past it the run "
        "stops with one line naming the function and the sample it was on. 0: no limit.",
        resumable=True,
        default=300.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.lt(float("inf"))],
    )
