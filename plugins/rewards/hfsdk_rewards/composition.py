"""The weighted sum of reward functions that a ``reward`` (or ``cost``) section describes.

The section (a signal section of the run config) lists functions::

    reward:
      functions:
        - name: exact_match            # registered name, module:function or file.py:function
          weight: 1.0
          kwargs: {answer_column: answer}
        - name: my_rewards.py:brevity
          weight: 0.1
        - name: verl_rewards.py:compute_score
          style: verl                  # optional: hfsdk, verl, trl, openrlhf (else by signature)

``kwargs`` build the function's config class when it registered one (passed
as ``config=``); otherwise they are passed to the function as keyword arguments.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HfsdkError
from hfsdk_rewards.call_styles import RewardStyles
from hfsdk_rewards.calling import (
    DEFAULT_TIMEOUT_S,
    Columns,
    RewardCall,
    call_reward_functions,
)
from hfsdk_rewards.loading import registered_styles, resolve_reward_function


@attrs.frozen(kw_only=True)
class WeightedReward:
    """A loaded reward function and its weight in the sum."""

    call: RewardCall
    weight: float


def _field(spec: Any, name: str, default: Any) -> Any:
    if isinstance(spec, Mapping):
        return spec.get(name, default)
    return getattr(spec, name, default)


def _specs(config: Any) -> list[Any]:
    specs = _field(config, "functions", config)
    if isinstance(specs, str | Mapping) or not isinstance(specs, Sequence):
        raise HfsdkError(
            f"reward config {config!r} has no list of functions; expected a signal section with "
            "'functions: [{name: ..., weight: ..., kwargs: {...}}, ...]'"
        )
    if not specs:
        raise HfsdkError(
            "the reward config lists no functions; add at least one under 'functions' "
            "(e.g. {name: exact_match})"
        )
    return list(specs)


def _unknown_kwargs(label: str, config_cls: type, kwargs: Mapping[str, Any]) -> str | None:
    """One line naming the kwargs ``config_cls`` has no field for (``None``: all known)."""
    fields = [f.name for f in attrs.fields(config_cls)]
    unknown = sorted(str(key) for key in kwargs if key not in fields)
    if not unknown:
        return None
    close = difflib.get_close_matches(unknown[0], fields, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    names = ", ".join(repr(key) for key in unknown)
    return (
        f"reward function {label!r}: unknown kwarg{'s' if len(unknown) > 1 else ''} {names}"
        f"{hint} (allowed keys: {', '.join(fields)})"
    )


_WHOLE = "bad value for config key 'kwargs': "
"""How the converter words a check that spans fields (no single key to name)."""


def _build_kwargs(label: str, config_cls: type | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The function's keyword arguments: ``config=`` built from ``kwargs`` when it has a
    config class, else ``kwargs`` themselves; a bad kwarg is one line naming it."""
    if config_cls is None:
        return dict(kwargs)
    from hfsdk import ConfigError, make_converter, structure

    unknown = _unknown_kwargs(label, config_cls, kwargs)
    if unknown:
        raise HfsdkError(unknown)
    try:  # the run config's strict reading (its float fields take YAML's string '1e-1')
        return {"config": structure(make_converter(), dict(kwargs), config_cls, path="kwargs")}
    except ConfigError as exc:
        detail = str(exc)
        if detail.startswith(_WHOLE):  # e.g. buffer_length > max_length: values that clash
            detail = (
                f"kwargs {dict(kwargs)!r} do not fit together: {detail[len(_WHOLE) :]}; "
                "change one of them"
            )
        raise HfsdkError(f"reward function {label!r}: {detail}") from exc


def metric_names(names: Sequence[Any]) -> list[Any]:
    """Metric names of reward functions: a ``module:function`` or ``file.py:function``
    is logged under its function's name, unless another entry's function has the same
    name (then both keep their full name)."""

    def short(name: Any) -> Any:
        return name.rsplit(":", 1)[-1] if isinstance(name, str) and ":" in name else name

    owners: dict[Any, set[Any]] = {}
    for name in names:
        owners.setdefault(short(name), set()).add(name)
    return [short(n) if len(owners[short(n)]) == 1 else n for n in names]


def _entry_name(spec: Any) -> Any:
    """The function name an entry resolves to: a `url` entry without a name is `remote`."""
    name = _field(spec, "name", None)
    return (name or "remote") if _field(spec, "url", None) is not None else name


def _unused_metric(metric: str, taken: set[str]) -> str:
    """``metric``, or ``metric#n`` with the first free n, so no two functions share a key
    (their means would overwrite each other); records the result in ``taken``."""
    candidate, n = metric, 1
    while candidate in taken:
        n += 1
        candidate = f"{metric}#{n}"
    taken.add(candidate)
    return candidate


def load_reward_functions(
    config: Any, *, base_dir: str | Path | None = None, styles: RewardStyles | None = None
) -> list[WeightedReward]:
    """Resolve and configure every function of a reward section (call once to check a config).

    ``config`` is a ``SignalConfig`` (anything with ``functions``) or the list of
    functions itself; each function is an object or a dict with ``name``,
    ``weight`` (default 1) and ``kwargs`` (default none). ``styles``: the reward call
    styles (default: the registered ones, looked up once here).
    """
    styles = styles if styles is not None else registered_styles()
    loaded: list[WeightedReward] = []
    seen: dict[str, int] = {}
    specs = _specs(config)
    # Metric names come from the names the entries resolve to: a `url` entry is `remote`.
    names = [_entry_name(spec) for spec in specs]
    taken: set[str] = set()
    for spec, name, metric in zip(specs, names, metric_names(names), strict=True):
        weight = _field(spec, "weight", 1.0)
        kwargs = _field(spec, "kwargs", None) or {}
        url = _field(spec, "url", None)
        if url is not None and isinstance(kwargs, Mapping):
            kwargs = {**kwargs, "url": url}
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
        ):
            raise HfsdkError(
                f"reward function {name!r}: weight={weight!r}; expected a finite number"
            )
        if not isinstance(kwargs, Mapping):
            raise HfsdkError(f"reward function {name!r}: kwargs={kwargs!r}; expected a mapping")
        resolved = resolve_reward_function(name, base_dir=base_dir)
        # The same function twice (e.g. with different kwargs) gets distinct metric names.
        seen[name] = seen.get(name, 0) + 1
        label = name if seen[name] == 1 else f"{name}#{seen[name]}"
        style = styles.check_name(label, _field(spec, "style", None))
        if resolved.config_cls is not None and style not in (None, "hfsdk"):
            raise HfsdkError(
                f"reward function {label!r} is a registered hfsdk function; style={style!r} "
                "applies only to functions given as 'module:function' or 'file.py:function'"
            )
        check, needs = None, ()
        if resolved.config_cls is not None:
            fn, call_kwargs, style = (
                resolved.fn,
                _build_kwargs(label, resolved.config_cls, kwargs),
                "hfsdk",
            )
            if resolved.columns is not None:
                needs = tuple(resolved.columns(call_kwargs["config"]))
        else:
            fn, call_kwargs, style, call_style = styles.adapt(label, resolved.fn, style, kwargs)
            check = call_style.check if call_style is not None else None
        metric = _unused_metric(metric if seen[name] == 1 else f"{metric}#{seen[name]}", taken)
        call = RewardCall(
            label=label,
            fn=fn,
            kwargs=call_kwargs,
            style=style,
            metric=metric,
            check=check,
            needs=needs,
        )
        loaded.append(WeightedReward(call=call, weight=float(weight)))
    return loaded


def _check_batch(prompts: Sequence[str], responses: Sequence[str], columns: Columns) -> None:
    if len(prompts) != len(responses):
        raise HfsdkError(
            f"{len(prompts)} prompts but {len(responses)} responses; expected one prompt per "
            "response (repeat each prompt for its n samples)"
        )
    for key, values in columns.items():
        if len(values) != len(responses):
            raise HfsdkError(
                f"dataset column {key!r} has {len(values)} values for {len(responses)} responses; "
                "expected one per response"
            )


def compute_rewards(
    prompts: Sequence[str],
    responses: Sequence[str],
    columns: Columns | None,
    config: Any,
    *,
    base_dir: str | Path | None = None,
    section: str = "reward",
    functions: Sequence[WeightedReward] | None = None,
) -> tuple[list[float], dict[str, float]]:
    """Score a batch with the weighted sum of the configured reward functions.

    Returns one float per response and metrics: ``<label>`` (the mean raw score
    of each function) and ``<label>/<key>`` (the mean of each extra numeric
    value a function returned in its dicts). Raises
    :class:`~hfsdk_rewards.errors.RewardFunctionError` when a function
    raises (naming the function, the sample and the exception), returns
    anything but one finite score per response, or runs past the section's
    ``timeout_s`` (``section`` names it in the message). ``functions``: the section's
    functions as :func:`load_reward_functions` loaded them (a run loads them once);
    default: load them now.
    """
    columns = dict(columns or {})
    _check_batch(prompts, responses, columns)
    if functions is None:
        functions = load_reward_functions(config, base_dir=base_dir)
    if not responses:
        return [], {}
    timeout_s = _field(config, "timeout_s", DEFAULT_TIMEOUT_S)
    results = call_reward_functions(
        [f.call for f in functions],
        prompts,
        responses,
        columns,
        timeout_s=timeout_s,
        timeout_key=f"{section}.timeout_s",
    )
    totals = [0.0] * len(responses)
    metrics: dict[str, float] = {}
    for function, result in zip(functions, results, strict=True):
        label = function.call.metric or function.call.label
        for index, score in enumerate(result.scores):
            totals[index] += function.weight * score
        metrics[label] = sum(result.scores) / len(result.scores)
        metrics.update({f"{label}/{key}": value for key, value in result.metrics.items()})
    return totals, metrics
