"""Check a reward function's signature against its call style and the dataset's columns.

Run before any worker starts (the preflight) and by ``hfsdk data inspect``, so a
function that cannot be called the way its style calls it fails in one line
that says the convention it was expected to follow and which parameter or
column is at fault, instead of a raw ``TypeError`` from the first batch.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Collection
from typing import Any

import attrs

CONVENTIONS = {
    "hfsdk": "fn(prompts, responses, **columns), called once per batch with lists, the "
    "dataset's columns by keyword",
}
_OTHER_STYLES = (
    "for one call per sample write compute_score(data_source, solution_str, ground_truth, "
    "extra_info=None) (verl style)"
)


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return None


def _required_unfilled(parameters: list[inspect.Parameter], given: Collection[str]) -> list[str]:
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        p.name
        for p in parameters
        if p.kind in keyword_kinds and p.default is inspect.Parameter.empty and p.name not in given
    ]


def unknown_setting(
    label: str,
    parameters: list[inspect.Parameter],
    settings: Collection[str],
    offered: list[inspect.Parameter],
    after: str = "after prompts and responses",
) -> str | None:
    """Why a setting in a function's ``kwargs`` cannot be passed, in one line; ``None``
    when every one can. A function without ``**kwargs`` would fail at the first batch
    with a raw ``TypeError`` blamed on the data; ``offered`` are the parameters a setting
    may fill (named in the message, ``after`` says which are left out)."""
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [p.name for p in offered if p.kind in keyword_kinds]
    for setting in settings:
        if setting in names:
            continue
        close = difflib.get_close_matches(setting, names, n=1)
        hint = f" did you mean {close[0]!r}?" if close else ""
        return (
            f"reward function {label!r} is given the setting {setting!r} in its kwargs, which "
            f"it does not take (parameters {after}: {', '.join(names) or 'none'});{hint} fix "
            "the name in kwargs, or give the function that parameter (or **kwargs)"
        )
    return None


def setting_problem(call: Any) -> str | None:
    """Why an hfsdk-style ``call`` cannot take a setting in its ``kwargs``, in one line;
    ``None`` when it can (or the call is of another style, or has no signature)."""
    parameters = _parameters(call.fn) if call.style == "hfsdk" else None
    if parameters is None:
        return None
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    rest = [p for p in parameters if p not in positional[:2]]
    return unknown_setting(call.label, parameters, call.kwargs, rest)


def _check_hfsdk(call: Any, columns: Collection[str]) -> str | None:
    parameters = _parameters(call.fn)
    if parameters is None:
        return None
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    expected = f"expected {CONVENTIONS['hfsdk']}"
    if len(positional) < 2 and not varargs:
        names = ", ".join(p.name for p in positional) or "none"
        return (
            f"reward function {call.label!r} takes {len(positional)} positional parameter(s) "
            f"({names}) but is given prompts and responses positionally; {expected} (or "
            f"{_OTHER_STYLES})"
        )
    passed = call.arguments({name: [] for name in columns})  # what goes by keyword
    for index, parameter in enumerate(positional[:2]):
        if parameter.name in passed:
            what = ("prompts", "responses")[index]
            origin = (
                f"the dataset's column {parameter.name!r}"
                if parameter.name in columns
                else f"the setting {parameter.name!r} in its kwargs"
            )
            return (
                f"reward function {call.label!r}: its parameter {parameter.name!r} receives the "
                f"{what} (positional argument {index + 1}), and {origin} is passed by keyword "
                f"too; {expected}: rename the parameter (e.g. {what}) or the column (or "
                f"{_OTHER_STYLES})"
            )
    rest = [p for p in parameters if p not in positional[:2]]
    unknown = unknown_setting(call.label, parameters, call.kwargs, rest)
    if unknown is not None:
        return unknown
    missing = _required_unfilled(rest, passed)
    if missing:
        from hfsdk import HIDDEN_COLUMNS

        # As the missing-column line: the columns the user's data holds, not derived ones.
        shown = sorted(name for name in columns if name not in HIDDEN_COLUMNS)
        return (
            f"reward function {call.label!r} needs {missing[0]!r}, which is neither a dataset "
            f"column ({', '.join(shown) or 'none'}) nor a setting in its kwargs; "
            f"{expected}: give it a default, add it to kwargs, or add the column"
        )
    return None


def _column_fix(call: Any, column: str, columns: Collection[str]) -> str:
    """How to point ``call`` at another column than ``column``: the setting of its config
    that names it (``call.needs`` comes from a registered function's ``columns(config)``),
    with verl's ``ground_truth`` column when the dataset has it."""
    config = call.kwargs.get("config")
    field = None
    if attrs.has(type(config)):
        field = next(
            (f.name for f in attrs.fields(type(config)) if getattr(config, f.name) == column),
            None,
        )
    if field is None:
        return "name the column that holds it in the function's kwargs"
    if "ground_truth" in columns:
        return f"set kwargs: {{{field}: ground_truth}} if that column holds it (verl's layout)"
    return f"set kwargs: {{{field}: COLUMN}} to the column that holds it"


def signature_problem(call: Any, columns: Collection[str]) -> str | None:
    """Why ``call`` (a :class:`~hfsdk_rewards.calling.RewardCall`) cannot be called with
    a batch holding ``columns``, in one line; ``None`` when it can."""
    from hfsdk import HIDDEN_COLUMNS, HfsdkError

    absent = [name for name in call.needs if name not in columns]
    if absent:
        shown = sorted(name for name in columns if name not in HIDDEN_COLUMNS)
        return (
            f"reward function {call.label!r} reads the dataset column {absent[0]!r}, which the "
            f"dataset lacks (columns: {', '.join(shown) or 'none'}); "
            f"{_column_fix(call, absent[0], columns)}, or add the column to the dataset"
        )
    try:
        if call.style == "hfsdk":
            return _check_hfsdk(call, columns)
        if call.check is not None:  # the call style's own check (docs/plugin_hooks.md)
            return call.check(call, columns)
    except HfsdkError as exc:  # e.g. a setting named like a column
        return str(exc)
    return None
