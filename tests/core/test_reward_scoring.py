"""The reward contract: a plugin's scorer scores the trainer's batches; without one, one line."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from hfsdk.core.batch import Batch
from hfsdk.core.cli.known_commands import MissingPluginError
from hfsdk.core.config.signal_config import SignalConfig, SignalFunction
from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import build_plugin_manager
from hfsdk.core.reward_scoring import RewardScorer, build_reward_scorer
from hfsdk.core.trainer.run_assets import SignalScorer

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugin_hooks.md"
SECTION = SignalConfig(functions=(SignalFunction(name="anything"),))


def _doc_plugin() -> types.ModuleType:
    section = DOC.read_text().split("## hfsdk_build_reward_scorer\n", 1)[1].split("\n## ", 1)[0]
    example = re.findall(r"```python\n(.*?)```", section, flags=re.S)[1]
    module = types.ModuleType("length_scorer_doc")
    exec(compile(example, "plugin_hooks.md", "exec"), module.__dict__)
    return module


def test_the_documented_scorer_scores_the_trainers_batches() -> None:
    pm = build_plugin_manager([("length_doc", _doc_plugin())], load_entry_points=False)
    scorer = build_reward_scorer("reward", SECTION, pm)
    assert isinstance(scorer, RewardScorer)
    batch = Batch.from_dict(
        non_tensors={
            "raw_prompt": ["a", "b", "c"],
            "response_text": ["xy", "x" * 30, ""],
            "answer": ["1", "2", "3"],
        }
    )
    scores, metrics = SignalScorer("reward", SECTION, None, scorer)(batch)
    assert scores.tolist() == [2.0, 10.0, 0.0]  # capped at 10 by the example
    assert metrics == {"length": 4.0}


def test_a_section_nobody_scores_names_the_distribution_to_install() -> None:
    pm = build_plugin_manager([], load_entry_points=False)
    with pytest.raises(MissingPluginError) as info:
        build_reward_scorer("cost", SECTION, pm)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("scoring cost.functions (the reward runtime) comes with ")
    assert "hfsdk-plugin-rewards" in message
    assert message.endswith("or score cost with a model (cost.model.model_path=DIR)")


def test_an_answer_without_score_is_refused() -> None:
    import hfsdk

    class Wrong:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_build_reward_scorer(section, config):  # type: ignore[no-untyped-def]
            return lambda prompts, responses, columns: ([], {})

    pm = build_plugin_manager([("wrong", Wrong)], load_entry_points=False)
    with pytest.raises(HfsdkError, match=r"returned a function for 'reward'; expected an object"):
        build_reward_scorer("reward", SECTION, pm)
