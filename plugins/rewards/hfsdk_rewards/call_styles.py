"""Reward call styles: how functions written for another framework's convention are called.

hfsdk calls a reward function once per batch as ``fn(prompts, responses,
**columns)`` (the ``hfsdk`` style, always there). Other conventions (verl's
per-sample ``compute_score``, TRL's ``completions``, OpenRLHF's ``queries``)
are *reward call styles* that plugins register through
``hfsdk_register_reward_styles``: ``register(name, RewardCallStyle(...))``.
A style wraps a function into hfsdk's convention, may recognise a function by
its signature, and may check that a function can be called that way before a
run starts.

:class:`RewardStyles` is the table of every registered style, resolved once
when a reward section is loaded (never per batch).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk import HfsdkError

if TYPE_CHECKING:
    from hfsdk import Registry

HFSDK_STYLE = "hfsdk"
"""hfsdk's own convention: ``fn(prompts, responses, **columns)``, once per batch."""

Adapter = Callable[[str, Callable[..., Any], Mapping[str, Any]], Callable[..., Any]]
"""``adapt(label, fn, settings) -> fn(prompts, responses, **columns)``: the wrapped function
binds ``settings`` (the function's ``kwargs``) itself."""


@attrs.frozen(kw_only=True)
class RewardCallStyle:
    """A calling convention for reward functions, registered under its name.

    ``adapt(label, fn, settings)`` returns a callable in hfsdk's convention that
    calls ``fn`` the way its framework does. ``recognises(fn)`` says whether a
    function's signature follows this style (used when a config gives no
    ``style:``; ``None``: only chosen by name). ``check(call, columns)`` returns
    one line saying why the adapted ``call`` (a
    :class:`~hfsdk_rewards.calling.RewardCall`) cannot be called with a
    dataset of ``columns``, or ``None`` when it can (run before any worker
    starts and by ``hfsdk data inspect``).
    """

    adapt: Adapter
    recognises: Callable[[Callable[..., Any]], bool] | None = None
    check: Callable[[Any, Collection[str]], str | None] | None = None


class RewardStyles:
    """Every registered reward call style by name, plus hfsdk's own (resolved once per run)."""

    def __init__(
        self,
        styles: Mapping[str, RewardCallStyle],
        explain_missing: Callable[[], str] | None = None,
    ) -> None:
        for name, style in styles.items():
            if not isinstance(style, RewardCallStyle):
                raise HfsdkError(
                    f"reward style {name!r} was registered as {type(style).__name__}; expected "
                    "an hfsdk.RewardCallStyle (register(name, RewardCallStyle(adapt=...)))"
                )
        self._styles = dict(styles)
        self._explain_missing = explain_missing

    @classmethod
    def from_registry(cls, registry: Registry) -> RewardStyles:
        """The styles in the ``reward_styles`` registry (``hfsdk list reward-styles``)."""
        return cls({name: registry[name].impl for name in registry}, registry.explain_missing)

    @property
    def names(self) -> tuple[str, ...]:
        """``hfsdk`` and every registered style, in the order they are tried."""
        return (HFSDK_STYLE, *sorted(self._styles))

    def check_name(self, label: str, style: Any) -> str | None:
        """``style`` if it names a known style (or is ``None``); otherwise a one-line error."""
        if style is None or style in self.names:
            return style
        note = self._explain_missing() if self._explain_missing is not None else ""
        raise HfsdkError(
            f"reward function {label!r}: style={style!r}; expected one of "
            f"{', '.join(self.names)} (or leave it out to recognise the style by the function's "
            f"parameters){note}"
        )

    def detect(self, fn: Callable[..., Any]) -> str:
        """The style whose ``recognises`` accepts ``fn`` (``hfsdk`` when none does)."""
        for name in sorted(self._styles):
            recognises = self._styles[name].recognises
            if recognises is not None and recognises(fn):
                return name
        return HFSDK_STYLE

    def adapt(
        self, label: str, fn: Callable[..., Any], style: str | None, settings: Mapping[str, Any]
    ) -> tuple[Callable[..., Any], dict[str, Any], str, RewardCallStyle | None]:
        """``(callable, kwargs, style name, style)`` in hfsdk's convention.

        For hfsdk-style functions the settings stay keyword arguments of the
        call (and the style is ``None``); the adapters bind them themselves.
        """
        name = self.check_name(label, style) or self.detect(fn)
        if name == HFSDK_STYLE:
            return fn, dict(settings), name, None
        entry = self._styles[name]
        return entry.adapt(label, fn, settings), {}, name, entry


__all__ = ["HFSDK_STYLE", "RewardCallStyle", "RewardStyles"]
