"""Declarative description of an algorithm's dataflow.

The placement search reads it to decide which roles share devices; the
trainer never needs it. Keep it free of heavy imports.
"""

from __future__ import annotations

from typing import Literal

import attrs

WorkKind = Literal["generation", "inference", "training"]
WORK_KINDS: tuple[str, ...] = ("generation", "inference", "training")


@attrs.frozen(kw_only=True)
class Stage:
    """One stage of an iteration: which role does which kind of work.

    ``work`` maps role name to ``"generation"``, ``"inference"`` or ``"training"``;
    a role may appear in a stage more than once by listing the stage twice
    (e.g. ReMax's sampled and greedy generations). ``timings`` are the names
    the algorithm's ``step()`` times within this stage (``timing/<name>_s``);
    empty means the stage's own name.
    """

    name: str
    work: tuple[tuple[str, WorkKind], ...] = attrs.field(
        converter=lambda w: tuple(tuple(x) for x in w)
    )
    timings: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    @property
    def timed_names(self) -> tuple[str, ...]:
        """What ``step()`` times in this stage."""
        return self.timings or (self.name,)

    @work.validator
    def _check(self, _attr: attrs.Attribute, value: tuple[tuple[str, str], ...]) -> None:
        for role, kind in value:
            if kind not in WORK_KINDS:
                raise ValueError(
                    f"stage {self.name!r}: role {role!r} has work {kind!r}; "
                    f"expected one of {WORK_KINDS}"
                )


@attrs.frozen(kw_only=True)
class Dataflow:
    """The roles of an algorithm and its stages, in execution order."""

    roles: tuple[str, ...] = attrs.field(converter=tuple)
    stages: tuple[Stage, ...] = attrs.field(converter=tuple)

    @stages.validator
    def _check(self, _attr: attrs.Attribute, value: tuple[Stage, ...]) -> None:
        for stage in value:
            for role, _kind in stage.work:
                if role not in self.roles:
                    raise ValueError(
                        f"stage {stage.name!r} uses unknown role {role!r}; roles are {self.roles}"
                    )
