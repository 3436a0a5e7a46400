"""Which teacher scores which rows: the dataset's ``data_source`` column, routed by config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk import HfsdkError


def teacher_for_unrouted(default_teacher: str | None, teachers: Sequence[str]) -> str | None:
    """The teacher of rows no route names: the configured one, the first teacher, or none."""
    if default_teacher is None:
        return teachers[0]
    return default_teacher or None


def route_rows(
    sources: Sequence[Any] | None,
    n_rows: int,
    routes: Mapping[str, str],
    fallback: str | None,
    *,
    setting: str = "teacher_routes",
    column: str = "data_source",
    columns: Sequence[str] = (),
) -> dict[str, list[int]]:
    """Teacher role → the row positions it scores (in row order); every row exactly once.

    ``sources`` is the batch's ``column`` (``None`` when the data has none: with no
    ``routes`` every row goes to ``fallback``; with routes it is refused, naming
    ``columns``, the data's columns). ``setting`` names the routes' config key in the
    refusal of a row no route and no fallback takes.
    """
    if sources is None and routes and n_rows:
        # Routes by a column the data lacks (a misspelt route_key) would otherwise send every
        # row to the fallback teacher and leave the routed ones idle without a word.
        raise HfsdkError(
            f"algorithm.{setting} routes rows by their {column!r} column, which this data does "
            f"not have (algorithm.route_key={column!r}; columns: {', '.join(columns) or '(none)'}"
            "); set algorithm.route_key to the column that names each row's source, or add the "
            "column to the data"
        )
    if sources is None and fallback is None and n_rows:
        raise HfsdkError(
            f"algorithm.{setting} routes rows by their {column!r} column, which this data does "
            f"not have; add the column to the data, set algorithm.route_key to the column that "
            "names each row's source, or set algorithm.default_teacher"
        )
    plan: dict[str, list[int]] = {}
    for row in range(n_rows):
        source = None if sources is None else sources[row]
        teacher = routes.get(str(source), fallback) if source is not None else fallback
        if teacher is None:
            known = ", ".join(sorted(routes)) or "(none)"
            raise HfsdkError(
                f"row {row} has {column} {source!r}, which algorithm.{setting} does not "
                f"route (routed: {known}) and algorithm.default_teacher names no teacher; add "
                "a route for it or set algorithm.default_teacher to one of the teacher roles"
            )
        plan.setdefault(teacher, []).append(row)
    return plan


def routing_problems(
    routes: Mapping[str, str], default_teacher: str | None, teachers: Sequence[str]
) -> list[str]:
    """Config problems: a route or default naming a role that is not one of the teachers."""
    problems = []
    allowed = ", ".join(teachers)
    for source, role in routes.items():
        if role not in teachers:
            problems.append(
                f"algorithm.teacher_routes.{source} is {role!r}, which is not a teacher role of "
                f"this algorithm; teacher roles: {allowed}"
            )
    if default_teacher and default_teacher not in teachers:
        problems.append(
            f"algorithm.default_teacher is {default_teacher!r}, which is not a teacher role of "
            f"this algorithm; teacher roles: {allowed} (or null for the first, '' for none)"
        )
    return problems


def idle_teacher_problems(
    routes: Mapping[str, str], default_teacher: str | None, teachers: Sequence[str]
) -> list[str]:
    """Config problems of ``teacher_routes``: a teacher role that no route and not the teacher
    of unrouted rows names would be loaded and never called. Empty routes send every row to
    the unrouted rows' teacher, as documented (``distill_multi``'s default): not checked."""
    if not routes:
        return []
    named = {*routes.values(), teacher_for_unrouted(default_teacher, teachers)}
    idle = [role for role in teachers if role not in named]
    if not idle:
        return []
    roles = ", ".join(repr(role) for role in idle)
    fallback = teacher_for_unrouted(default_teacher, teachers)
    unrouted = f"unrouted rows go to {fallback!r}" if fallback else "unrouted rows are refused"
    return [
        f"teacher role{'s' if len(idle) > 1 else ''} {roles} of this algorithm "
        f"{'have' if len(idle) > 1 else 'has'} no route in algorithm.teacher_routes and "
        f"{unrouted} (algorithm.default_teacher), so {'they' if len(idle) > 1 else 'it'} "
        f"would be loaded and never called; route a source to {'each' if len(idle) > 1 else 'it'}"
        " in algorithm.teacher_routes or set algorithm.default_teacher to "
        f"{'one' if len(idle) > 1 else 'it'}, or use an algorithm without that role "
        "(--algo distill for one teacher)"
    ]


def weight_problems(
    weights: Mapping[str, float],
    teachers: Sequence[str],
    *,
    algorithm: str = "distill",
    default_teacher: str | None = None,
    route_key: str | None = None,
) -> list[str]:
    """Config problems of ``teacher_weights``: unknown teacher roles, weights not > 0, a
    teacher role given no weight, and the routing settings a mixture never reads.

    ``default_teacher`` and ``route_key`` are the configured values when they differ from
    their defaults (``None`` otherwise); ``algorithm`` names the run's algorithm.
    """
    if not weights:
        return []
    allowed = ", ".join(teachers)
    problems = []
    for role, weight in weights.items():
        if role not in teachers:
            problems.append(
                f"algorithm.teacher_weights.{role}: {role!r} is not a teacher role of this "
                f"algorithm; teacher roles: {allowed}"
            )
        elif not float(weight) > 0:
            problems.append(
                f"algorithm.teacher_weights.{role} is {weight}; a teacher's weight must be > 0 "
                "(leave a teacher out to give it none)"
            )
    # With a role misnamed, its message (listing the roles) says it already: no second line.
    for role in teachers if all(role in teachers for role in weights) else ():
        if role not in weights:
            # Every row goes to the weighted teachers only: the role's model would be loaded
            # and its workers started for nothing. The roles come from the spec (with weights,
            # algorithm.teachers cannot name others), so the config cannot drop one.
            problems.append(
                f"algorithm.teacher_weights gives teacher role {role!r} no weight, so it would "
                "be loaded and never called; give it a weight (algorithm "
                f"{algorithm!r} has the teacher roles {allowed}, fixed by its spec), or use an "
                "algorithm without that role (--algo distill for one teacher)"
            )
    # A mixture scores every row with every weighted teacher: nothing is routed.
    if default_teacher is not None:
        problems.append(
            f"algorithm.default_teacher={default_teacher!r} with algorithm.teacher_weights: "
            "every row is scored by every weighted teacher, so no row is left to a default "
            "teacher; remove default_teacher, or route rows with teacher_routes instead of "
            "teacher_weights"
        )
    if route_key is not None:
        problems.append(
            f"algorithm.route_key={route_key!r} with algorithm.teacher_weights: every row is "
            "scored by every weighted teacher, so the column is never read; remove route_key, "
            "or route rows with teacher_routes instead of teacher_weights"
        )
    return problems
