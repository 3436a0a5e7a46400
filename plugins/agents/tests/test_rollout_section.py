"""``rollout.multi_turn`` is the agents plugin's sub-section of the rollout config, and the
agent loop reaches every backend through the core's generation-strategy seam."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from hfsdk import ConfigError, RolloutConfig, generate_rollout
from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config, resolve_run_config
from hfsdk.core.generation_strategy import SequencesStrategy, resolve_generation
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk_agents.config import MultiTurnConfig
from hfsdk_agents.generate import AgentGeneration

from .fakes import prompt_batch, rollout_for, word_tokenizer


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("HFSDK_LOAD_PLUGINS", "HFSDK_DISABLE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


MULTI_TURN = {"tools": ["add"], "max_turns": 3, "max_response_tokens": 40}


def test_multi_turn_keys_fill_the_plugins_subsection_and_print_back() -> None:
    cfg = resolve_run_config("grpo", {"rollout": {"multi_turn": MULTI_TURN}})
    multi_turn = cfg.rollout.section(MultiTurnConfig)
    assert multi_turn.active and multi_turn.max_turns == 3 and multi_turn.tools == ("add",)
    # the trajectory budget owns the responses' width and the rollout's prompt length
    assert cfg.rollout.response_width() == 40
    assert cfg.rollout.response_budget() == (40, "rollout.multi_turn.max_response_tokens")
    assert cfg.rollout.max_prompt_length == cfg.data.max_prompt_length + 40
    plain = cfg.to_dict()["rollout"]
    assert plain["multi_turn"]["max_turns"] == 3 and "subsections" not in plain
    again = resolve_run_config("grpo", yaml.safe_load(cfg.to_yaml()))
    assert again.rollout == cfg.rollout


def test_a_multi_turn_rollout_holds_the_prompt_and_the_budget() -> None:
    tools = ["rollout.multi_turn.tools=[add]", "rollout.multi_turn.max_response_tokens=24"]
    config = load_run_config("grpo", None, [*tools, "data.max_prompt_length=40"])
    assert (config.data.max_prompt_length, config.rollout.max_prompt_length) == (40, 64)
    # An older multi-turn config gave the rollout's context: the prompt is what is left.
    config = load_run_config("grpo", None, [*tools, "rollout.max_prompt_length=64"])
    assert (config.data.max_prompt_length, config.rollout.max_prompt_length) == (40, 64)
    with pytest.raises(ConfigError, match=r"rollout\.max_prompt_length=50 disagrees"):
        load_run_config(
            "grpo", None, [*tools, "data.max_prompt_length=40", "rollout.max_prompt_length=50"]
        )


def test_without_multi_turn_the_backend_decides_the_width() -> None:
    cfg = resolve_run_config("grpo", {"rollout": {"max_response_length": 12}})
    assert not cfg.rollout.section(MultiTurnConfig).active
    assert cfg.rollout.response_budget() == (12, "rollout.max_response_length")
    assert RolloutConfig(backend="x").section(MultiTurnConfig) == MultiTurnConfig()


@pytest.mark.parametrize(
    ("overrides", "pattern"),
    [
        (
            {"multi_turn": {"max_turn": 2}},
            r"unknown config key 'rollout\.multi_turn\.max_turn'; did you mean "
            r"'rollout\.multi_turn\.max_turns'",
        ),
        ({"multi_turn": {"max_turns": 0}}, r"rollout\.multi_turn\.max_turns"),
        ({"subsections": {"multi_turn": {}}}, r"unknown config key 'rollout\.subsections'"),
    ],
)
def test_bad_multi_turn_keys_name_their_dotted_key(overrides: dict, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        resolve_run_config("grpo", {"rollout": overrides})


def test_without_the_plugin_a_multi_turn_config_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "agents")
    reset_plugin_manager()
    with pytest.raises(ConfigError, match=r"'rollout\.multi_turn' belongs to the "
                       r"hfsdk-plugin-agents plugin.*pip install hfsdk-plugin-agents"):  # fmt: skip
        resolve_run_config("grpo", {"rollout": {"multi_turn": MULTI_TURN}})
    assert resolve_run_config("grpo", {}).rollout.subsections == {}
    monkeypatch.delenv("HFSDK_DISABLE_PLUGINS")
    reset_plugin_manager()
    assert resolve_run_config("grpo", {}).rollout.subsections == {"multi_turn": MultiTurnConfig()}


def test_settings_multi_turn_cannot_run_with_are_refused_when_resolved() -> None:
    data = {"rollout": {"multi_turn": MULTI_TURN}, "trainer": {"partial_rollout_tokens": 8}}
    with pytest.raises(ConfigError, match=r"partial_rollout_tokens=8 .*multi-turn"):
        resolve_run_config("grpo", data)


def test_config_show_prints_and_explains_the_subsection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["config", "show", "--algo", "grpo", "rollout.multi_turn.max_turns=3"])
    assert info.value.code == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["rollout"]["multi_turn"]["max_turns"] == 3
    with pytest.raises(SystemExit):
        main(["config", "show", "--algo", "grpo", "--explain"])
    out = capsys.readouterr().out
    assert "rollout.multi_turn.max_turns: 4" in out and "rollout.subsections" not in out


TOK = word_tokenizer(["1", "2", "+", "=", "3"])


def test_the_strategy_is_resolved_once_per_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    single = rollout_for(TOK, lambda context: [TOK.eos_token_id])
    assert isinstance(resolve_generation(single), SequencesStrategy)
    multi = rollout_for(TOK, lambda context: [TOK.eos_token_id], tools=["add"])
    calls = []
    real = resolve_generation

    def counted(rollout):  # type: ignore[no-untyped-def]
        calls.append(rollout)
        return real(rollout)

    monkeypatch.setattr("hfsdk.core.generation_strategy.resolve_generation", counted)
    for _ in range(2):
        out = generate_rollout(multi, prompt_batch(TOK, ["1 + 2 ="]))
    assert calls == [multi] and isinstance(multi.generation, AgentGeneration)
    # the agent loop ran: its columns are there, and the scripted model was asked per turn
    assert "agent_trajectory" in out.non_tensor_keys and multi.calls == 2
    plain = generate_rollout(single, prompt_batch(TOK, ["1 + 2 ="]))
    assert "agent_trajectory" not in plain.non_tensor_keys and single.calls == 1


LOOP_FILE = """
from hfsdk_agents import AgentLoop


class Once(AgentLoop):
    async def run(self, prompt_ids, row, ctx, *, seed):
        trajectory = ctx.new_trajectory(prompt_ids, row)
        await ctx.model_turn(trajectory, seed=seed)
        return trajectory


NOT_A_LOOP = 3
"""


def test_an_agent_loop_is_loaded_from_a_file_or_refused_in_one_line(tmp_path) -> None:
    from hfsdk_agents.loops import AgentLoop, load_agent_loop

    path = tmp_path / "loops.py"
    path.write_text(LOOP_FILE)
    cls = load_agent_loop(f"{path}:Once")
    assert issubclass(cls, AgentLoop) and cls.__name__ == "Once"
    assert load_agent_loop("tool_loop").__name__ == "ToolLoop"
    cases = {
        f"{path}:NOT_A_LOOP": r"is a int, not a subclass of hfsdk_agents.AgentLoop",
        f"{path}:Missing": r"has no attribute 'Missing'",
        f"{tmp_path}/absent.py:Once": r"^rollout.multi_turn.agent_loop .*does not exist",
    }
    for spec, pattern in cases.items():
        data = {"rollout": {"multi_turn": {**MULTI_TURN, "agent_loop": spec}}}
        with pytest.raises(ConfigError, match=pattern) as caught:
            resolve_run_config("grpo", data)
        assert "\n" not in str(caught.value)


def test_a_misspelt_parser_or_loop_and_unused_loop_args_are_refused_when_resolved(
    tmp_path,
) -> None:
    """They failed only at the first generate_sequences, after the models loaded; tool_loop
    ignored any loop_args."""
    path = tmp_path / "loops.py"
    path.write_text(LOOP_FILE)
    cases = {
        "parser: hermess": (
            {"parser": "hermess"},
            r"^rollout.multi_turn.parser: unknown tool parser 'hermess'.*did you mean 'hermes'",
        ),
        "agent_loop: tool_lop": (
            {"agent_loop": "tool_lop"},
            r"^rollout.multi_turn.agent_loop: unknown agent loop 'tool_lop'.*'tool_loop'",
        ),
        "loop_args for tool_loop": (
            {"loop_args": {"max_turns": 1}},
            r"^rollout.multi_turn.loop_args \['max_turns'\]: the agent loop 'tool_loop' "
            r"\(ToolLoop\) does not take them",
        ),
    }
    for name, (keys, pattern) in cases.items():
        data = {"rollout": {"multi_turn": {**MULTI_TURN, **keys}}}
        with pytest.raises(ConfigError, match=pattern) as caught:
            resolve_run_config("grpo", data)
        assert "\n" not in str(caught.value), name
    with pytest.raises(
        ConfigError, match=r"loop_args \['max_turns'\] are set but rollouts are not"
    ):
        resolve_run_config("grpo", {"rollout": {"multi_turn": {"loop_args": {"max_turns": 1}}}})
    # the environment reward in a run with no environment: refused at load, not at step 1
    with pytest.raises(ConfigError, match=r"reward.functions lists 'environment'.* no environment"):
        resolve_run_config("grpo", {"reward": {"functions": [{"name": "environment"}]}})
    # a custom loop keeps taking any loop_args (AgentLoop stores them as self.loop_args)
    custom = {"agent_loop": f"{path}:Once", "loop_args": {"uneven": True}}
    resolve_run_config("grpo", {"rollout": {"multi_turn": {**MULTI_TURN, **custom}}})
