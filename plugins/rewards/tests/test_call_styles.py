"""Reward call styles: a plugin's convention, registered through ``hfsdk_register_reward_styles``,
recognised by signature or chosen by name, its adapter called, its check run before a run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import build_plugin_manager
from hfsdk_rewards import compute_rewards, load_reward_functions
from hfsdk_rewards import plugin as rewards_plugin
from hfsdk_rewards.call_styles import RewardCallStyle, RewardStyles
from hfsdk_rewards.signatures import signature_problem


def pairs_adapter(label: str, fn: Callable[..., Any], settings: Mapping[str, Any]) -> Callable:
    """A 'pairs' convention: fn(pairs) with (prompt, response) tuples, settings bound."""

    def call(prompts: list[str], responses: list[str], **columns: Any) -> list[float]:
        return fn(list(zip(prompts, responses, strict=True)), **settings)

    return call


def pairs_check(call: Any, columns: Any) -> str | None:
    return None if "gold" in columns else f"reward function {call.label!r} needs a gold column"


class PairsPlugin:
    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_reward_styles(register):  # type: ignore[no-untyped-def]
        register(
            "pairs",
            RewardCallStyle(
                adapt=pairs_adapter,
                recognises=lambda fn: "pairs" in fn.__code__.co_varnames[:1],
                check=pairs_check,
            ),
            doc="fn(pairs): (prompt, response) tuples",
        )


def longer(pairs: list[tuple[str, str]], bonus: float = 0.0) -> list[float]:
    return [float(len(response) > len(prompt)) + bonus for prompt, response in pairs]


@pytest.fixture
def styles() -> RewardStyles:
    pm = build_plugin_manager(
        [("rewards", rewards_plugin), ("pairs_plugin", PairsPlugin)], load_entry_points=False
    )
    registry = pm.registry("reward_styles")
    assert registry["pairs"].plugin == "pairs_plugin"
    assert registry["pairs"].summary == "fn(pairs): (prompt, response) tuples"
    return RewardStyles.from_registry(registry)


def test_a_registered_style_is_recognised_adapted_and_checked(styles: RewardStyles) -> None:
    assert styles.names == ("hfsdk", "pairs")
    assert styles.detect(longer) == "pairs"
    assert styles.detect(lambda prompts, responses: [0.0]) == "hfsdk"
    spec = {"functions": [{"name": f"{__name__}:longer", "kwargs": {"bonus": 0.5}}]}
    (loaded,) = load_reward_functions(spec, styles=styles)
    assert loaded.call.style == "pairs" and loaded.call.kwargs == {}
    assert signature_problem(loaded.call, ["gold"]) is None
    assert signature_problem(loaded.call, ["answer"]) == (
        f"reward function '{__name__}:longer' needs a gold column"
    )
    # the loaded functions are reused as a run does (no lookup per batch)
    scores, metrics = compute_rewards(["ab", "abcd"], ["abc", "a"], {}, spec, functions=[loaded])
    assert scores == [1.5, 0.5] and metrics == {"longer": 1.0}


def test_an_unknown_style_lists_the_registered_ones(styles: RewardStyles) -> None:
    with pytest.raises(HfsdkError, match=r"style='verl'; expected one of hfsdk, pairs \(or leave"):
        load_reward_functions([{"name": f"{__name__}:longer", "style": "verl"}], styles=styles)
    # explicit hfsdk wins over the signature
    (loaded,) = load_reward_functions(
        [{"name": f"{__name__}:longer", "style": "hfsdk"}], styles=styles
    )
    assert loaded.call.style == "hfsdk"


def test_a_style_must_be_a_reward_call_style() -> None:
    with pytest.raises(
        HfsdkError, match=r"registered as function; expected an hfsdk\.RewardCallStyle"
    ):
        RewardStyles({"bad": longer})  # type: ignore[dict-item]


def test_the_documented_example_runs_as_written() -> None:
    import re
    import types
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md").read_text()
    section = doc.split("## hfsdk_register_reward_styles", 1)[1].split("\n## ", 1)[0]
    example = re.findall(r"```python\n(.*?)```", section, flags=re.S)[1]
    module = types.ModuleType("pairs_doc_plugin")
    exec(compile(example, "plugin_hooks.md", "exec"), module.__dict__)
    pm = build_plugin_manager(
        [("rewards", rewards_plugin), ("pairs_doc", module)], load_entry_points=False
    )
    styles = RewardStyles.from_registry(pm.registry("reward_styles"))
    spec = {"functions": [{"name": f"{__name__}:longer", "kwargs": {"bonus": 1.0}}]}
    (loaded,) = load_reward_functions(spec, styles=styles)
    assert loaded.call.style == "pairs"  # recognised by its `pairs` parameter
    scores, _ = compute_rewards(["ab", "abcd"], ["abc", "a"], {}, spec, functions=[loaded])
    assert scores == [2.0, 1.0]
