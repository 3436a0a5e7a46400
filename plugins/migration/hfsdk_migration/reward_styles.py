"""Reward functions written for verl, TRL or OpenRLHF, called as they expect.

A function's *style* is given as ``style:`` next to its name or recognised by
its signature. Each foreign style is a :class:`hfsdk_rewards.RewardCallStyle` this
plugin registers (``hfsdk_register_reward_styles``, see :data:`STYLES`): an
adapter that follows hfsdk's own convention (``fn(prompts, responses,
**columns)``), so loading, weighting, metrics and error reports stay the same:

======== ====================================================== ===========================
style    the function                                           called
======== ====================================================== ===========================
hfsdk    ``fn(prompts, responses, **columns)`` -> list          once per batch
verl     ``compute_score(data_source, solution_str,             once per sample
         ground_truth, extra_info=None)`` -> float | bool |
         dict | tuple (its first element)
trl      ``fn(prompts, completions, **kwargs)`` -> list         once per batch
openrlhf ``reward_func(queries, prompts, labels)`` -> tensor    once per batch
======== ====================================================== ===========================

The adapters read two hidden columns the prompt loader adds
(the run's hidden columns): the prompt's chat messages and the prompt
text the model saw. They receive them by naming them as parameters
(``prompt_messages``, ``rendered_prompt``), the only way a function gets them.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from hfsdk import HfsdkError
from hfsdk_rewards import RewardCallStyle, RewardStyles
from hfsdk_rewards.signatures import unknown_setting


def _parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # builtins without a signature: hfsdk's convention
        return {}


# Each style is recognised by one parameter name; where a function has several of them,
# verl's wins over TRL's over OpenRLHF's (the order hfsdk has always used).
def _is_verl(fn: Callable[..., Any]) -> bool:
    return "solution_str" in _parameters(fn)


def _is_trl(fn: Callable[..., Any]) -> bool:
    names = _parameters(fn)
    return "completions" in names and "solution_str" not in names


def _is_openrlhf(fn: Callable[..., Any]) -> bool:
    names = _parameters(fn)
    return "queries" in names and not {"solution_str", "completions"} & set(names)


def _accepts(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The data fields among ``kwargs`` that ``fn`` can take (all when it has ``**kwargs``).

    Only for data (verl's fields, dataset columns): settings are passed as given, like the
    frameworks do, and a setting the function does not take is refused before the run by
    its style's check (:func:`check_verl`, :func:`check_trl`, :func:`check_openrlhf`).
    """
    parameters = _parameters(fn)
    if not parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in parameters}


def _column(columns: Mapping[str, Sequence[Any]], name: str, size: int) -> list[Any]:
    values = columns.get(name)
    return list(values) if values is not None else [None] * size


def _is_bool(value: Any) -> bool:
    import numpy as np  # numpy's bool (np.isclose's answer) is no Python bool

    return isinstance(value, bool | np.bool_)


def _verl_score(value: Any) -> Any:
    """A ``compute_score`` result as verl reads it: a bool is 0.0/1.0, a tuple its first
    element, a dict's bool ``score`` 0.0/1.0; anything else as is, for hfsdk to check."""
    if isinstance(value, tuple) and value:
        value = value[0]  # verl's default_compute_score: (score, info) -> score
    if _is_bool(value):
        return float(value)  # verl writes a bool into its float reward tensor
    if isinstance(value, Mapping) and _is_bool(value.get("score")):
        return {**value, "score": float(value["score"])}
    return value


def verl_adapter(label: str, fn: Callable[..., Any], settings: Mapping[str, Any]) -> Callable:
    """Call a verl ``compute_score`` once per sample with the fields verl passes.

    ``data_source``, ``ground_truth`` and ``extra_info`` come from the columns of
    the same names (``ground_truth`` lifted from ``reward_model`` by the loader;
    ``extra_info`` is ``{}`` where the data has none, as in verl);
    ``settings`` (the function's ``kwargs``) are passed on every call, like verl's
    ``custom_reward_function.reward_kwargs``.
    """
    needs_truth = "ground_truth" in _parameters(fn) and (
        _parameters(fn)["ground_truth"].default is inspect.Parameter.empty
    )

    def verl_style(prompts: list[str], responses: list[str], **columns: Any) -> list[Any]:
        size = len(responses)
        sources = _column(columns, "data_source", size)
        truths = _column(columns, "ground_truth", size)
        extras = _column(columns, "extra_info", size)
        results = []
        for index, response in enumerate(responses):
            if needs_truth and truths[index] is None:
                keys = columns.get("reward_model")
                nested = keys[index] if keys is not None else None
                shown = (
                    sorted(k for k, v in nested.items() if v is not None)
                    if isinstance(nested, Mapping)
                    else "no reward_model column"
                )
                raise HfsdkError(
                    f"(verl style) sample {index} has no ground_truth (reward_model: {shown}); "
                    "add reward_model.ground_truth or a ground_truth column to the dataset"
                )
            fields = {
                "data_source": sources[index],
                "solution_str": response,
                "ground_truth": truths[index],
                # verl hands every call a dict ({} for a row without one), never None.
                "extra_info": dict(extras[index] or {}),
            }
            # verl merges reward_kwargs over its fields and passes them all.
            call = {**_accepts(fn, fields), **settings}
            try:
                results.append(_verl_score(fn(**call)))
            except HfsdkError:
                raise
            except Exception as exc:
                raise HfsdkError(
                    f"(verl style) raised {type(exc).__name__}: {exc} on sample {index} "
                    f"(response {response[:80]!r}); fix the function or the data"
                ) from exc
        return results

    verl_style.__doc__ = f"verl-style adapter of {label}"
    verl_style.hfsdk_source = fn  # type: ignore[attr-defined]  # for signature checks
    verl_style.hfsdk_settings = dict(settings)  # type: ignore[attr-defined]
    return verl_style


def _conversational(messages: Sequence[Any] | None) -> bool:
    return messages is not None and len(messages) > 0 and all(m is not None for m in messages)


def _trl_value(value: Any) -> Any:
    # TRL lets a function return None for samples it does not apply to; its weighted
    # nansum then adds nothing for them, which is what 0.0 does in a weighted sum.
    return 0.0 if value is None else value


def trl_adapter(label: str, fn: Callable[..., Any], settings: Mapping[str, Any]) -> Callable:
    """Call a TRL reward function once per batch with ``prompts``, ``completions`` and columns.

    For chat-format prompts, ``prompts`` are message lists and each completion
    is ``[{"role": "assistant", "content": text}]``, as TRL's conversational
    datasets give; otherwise both are strings. Every dataset column is a
    keyword argument (those the function can take).
    """

    def trl_style(
        prompts: list[str],
        responses: list[str],
        prompt_messages: Sequence[Any] | None = None,
        **columns: Any,
    ) -> Any:
        if _conversational(prompt_messages):
            shown: list[Any] = [list(m) for m in prompt_messages]  # type: ignore[union-attr]
            completions: list[Any] = [[{"role": "assistant", "content": r}] for r in responses]
        else:
            shown, completions = list(prompts), list(responses)
        kwargs = {**_accepts(fn, columns), **settings}
        result = fn(prompts=shown, completions=completions, **kwargs)
        if inspect.isawaitable(result):
            return _await_then(result, _trl_values)
        return _trl_values(result)

    trl_style.__doc__ = f"TRL-style adapter of {label}"
    trl_style.hfsdk_source = fn  # type: ignore[attr-defined]  # for signature checks
    trl_style.hfsdk_settings = dict(settings)  # type: ignore[attr-defined]
    return trl_style


def _trl_values(result: Any) -> Any:
    if isinstance(result, list):
        return [_trl_value(v) for v in result]
    return result


async def _await_then(awaitable: Any, then: Callable[[Any], Any]) -> Any:
    return then(await awaitable)


def _per_sample(values: Any, size: int) -> list[float] | None:
    if hasattr(values, "tolist"):
        values = values.tolist()
    if (
        isinstance(values, list)
        and len(values) == size
        and all(isinstance(v, numbers.Real) for v in values)
    ):
        return [float(v) for v in values]
    return None


def _openrlhf_values(result: Any, size: int) -> Any:
    """A tensor/list as is; a dict's ``rewards`` with per-sample ``extra_logs`` as metrics."""
    if not isinstance(result, Mapping):
        return result
    if "rewards" not in result:
        raise HfsdkError(
            f"(openrlhf style) returned a dict without 'rewards' (keys: {sorted(result)}); "
            "return a tensor of rewards or {'rewards': tensor, ...}"
        )
    rewards = result["rewards"]
    if hasattr(rewards, "tolist"):
        rewards = rewards.tolist()
    logs = result.get("extra_logs") or {}
    columns = {key: _per_sample(value, size) for key, value in logs.items()}
    if not isinstance(rewards, list) or not columns:
        return rewards
    items = []
    for index, reward in enumerate(rewards):
        item: dict[str, Any] = {"score": reward}
        for key, values in columns.items():
            if values is not None and math.isfinite(values[index]) and key != "score":
                item[key] = values[index]
        items.append(item)
    return items


def openrlhf_adapter(label: str, fn: Callable[..., Any], settings: Mapping[str, Any]) -> Callable:
    """Call an OpenRLHF ``reward_func(queries, prompts, labels)`` once per batch.

    ``prompts`` are the prompt texts the model saw (chat template applied),
    ``queries`` each prompt followed by its response, ``labels`` the values of
    the column ``label_key`` (a setting; default ``label`` when the dataset has
    it, else ``ground_truth``, like OpenRLHF's ``--label_key``). The result is
    a tensor (or list) of rewards, or a dict with ``rewards`` and optionally
    ``extra_logs`` (per-sample values become metrics).
    """
    settings = dict(settings)
    label_key = settings.pop("label_key", None)

    def openrlhf_style(
        prompts: list[str],
        responses: list[str],
        rendered_prompt: Sequence[str] | None = None,
        **columns: Any,
    ) -> Any:
        size = len(responses)
        shown = list(rendered_prompt) if rendered_prompt is not None else list(prompts)
        queries = [p + r for p, r in zip(shown, responses, strict=True)]
        key = label_key or ("label" if "label" in columns else "ground_truth")
        if key not in columns:
            if label_key is not None:
                raise HfsdkError(
                    f"(openrlhf style) label_key={label_key!r} is not a dataset column "
                    f"(columns: {sorted(columns)}); set kwargs.label_key to the label column"
                )
            labels: list[Any] = [None] * size
        else:
            labels = list(columns[key])
        result = fn(queries, shown, labels, **settings)
        if inspect.isawaitable(result):
            return _await_then(result, lambda r: _openrlhf_values(r, size))
        return _openrlhf_values(result, size)

    openrlhf_style.__doc__ = f"OpenRLHF-style adapter of {label}"
    openrlhf_style.label_key = label_key  # type: ignore[attr-defined]  # for data inspect
    openrlhf_style.hfsdk_source = fn  # type: ignore[attr-defined]  # for signature checks
    openrlhf_style.hfsdk_settings = settings  # type: ignore[attr-defined]  # less label_key
    return openrlhf_style


VERL_CONVENTION = (
    "compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs), called "
    "once per sample"
)
_VERL_FIELDS = ("data_source", "solution_str", "ground_truth", "extra_info")


def _source(call: Any) -> tuple[list[inspect.Parameter], dict[str, Any]] | None:
    """The adapted function's parameters and its settings; ``None`` when not adapted here or
    without a signature (a builtin: nothing to check)."""
    fn = getattr(call.fn, "hfsdk_source", None)
    if fn is None:
        return None
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    return parameters, dict(getattr(call.fn, "hfsdk_settings", {}) or {})


def check_verl(call: Any, columns: Collection[str]) -> str | None:
    """Why a verl-style ``call`` cannot be called (verl passes every field by keyword).

    ``columns`` do not matter: verl's fields come from fixed columns, checked per sample.
    A setting the function does not take is refused, as verl's call would raise TypeError.
    """
    found = _source(call)
    if found is None:
        return None
    parameters, settings = found
    if any(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in parameters):
        return (
            f"reward function {call.label!r} has positional-only parameters, but the verl style "
            f"passes every field by keyword; expected {VERL_CONVENTION}"
        )
    # verl merges reward_kwargs over its fields, so a setting may fill any but the response.
    offered = [p for p in parameters if p.name != "solution_str"]
    unknown = unknown_setting(call.label, parameters, settings, offered, "other than solution_str")
    if unknown is not None:
        return unknown
    varkw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    given = set(_VERL_FIELDS) | set(settings)
    given = given if varkw else {name for name in given if name in {p.name for p in parameters}}
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    missing = [
        p.name
        for p in parameters
        if p.kind in keyword_kinds and p.default is inspect.Parameter.empty and p.name not in given
    ]
    if missing:
        return (
            f"reward function {call.label!r} (verl style) needs {missing[0]!r}, which verl's "
            f"fields ({', '.join(_VERL_FIELDS)}) do not include; expected "
            f"{VERL_CONVENTION}: give {missing[0]!r} a default or set it in the function's "
            "kwargs"
        )
    return None


def check_trl(call: Any, columns: Collection[str]) -> str | None:
    """Why a TRL-style ``call`` cannot take its settings (each is passed to every call,
    with the dataset's columns); ``None`` when it can."""
    found = _source(call)
    if found is None:
        return None
    parameters, settings = found
    offered = [p for p in parameters if p.name not in ("prompts", "completions")]
    return unknown_setting(
        call.label, parameters, settings, offered, "other than prompts and completions"
    )


def check_openrlhf(call: Any, columns: Collection[str]) -> str | None:
    """Why an OpenRLHF-style ``call`` cannot take its settings (each is passed by keyword
    after queries, prompts and labels; ``label_key`` is the adapter's own); ``None`` when
    it can."""
    found = _source(call)
    if found is None:
        return None
    parameters, settings = found
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    taken = [p for p in parameters if p.kind in positional][:3]  # queries, prompts, labels
    offered = [p for p in parameters if p not in taken]
    return unknown_setting(
        call.label, parameters, settings, offered, "after queries, prompts and labels"
    )


STYLES = {
    "verl": RewardCallStyle(adapt=verl_adapter, recognises=_is_verl, check=check_verl),
    "trl": RewardCallStyle(adapt=trl_adapter, recognises=_is_trl, check=check_trl),
    "openrlhf": RewardCallStyle(
        adapt=openrlhf_adapter, recognises=_is_openrlhf, check=check_openrlhf
    ),
}
"""The reward call styles this plugin registers, by name."""

STYLE_DOCS = {
    "verl": "verl's compute_score(data_source, solution_str, ground_truth, extra_info=None), "
    "once per sample",
    "trl": "TRL's fn(prompts, completions, **columns), once per batch",
    "openrlhf": "OpenRLHF's reward_func(queries, prompts, labels), once per batch",
}
"""What ``hfsdk list reward-styles`` says of each."""


def detect_style(fn: Callable[..., Any]) -> str:
    """The style a function's parameter names say it follows (``hfsdk`` when none fits).

    ``solution_str`` means verl, ``completions`` means TRL, ``queries`` means
    OpenRLHF.
    """
    return RewardStyles(STYLES).detect(fn)


__all__ = ["STYLES", "STYLE_DOCS", "check_openrlhf", "check_trl", "check_verl", "detect_style"]
