"""The plugin's side of the reward contract: the run's scorer, its preflight check, the
refusal without the plugin."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk.core.reward_scoring import build_reward_scorer
from hfsdk_rewards.scorer import FunctionScorer, check_signatures

SECTION = {
    "functions": [
        {"name": "exact_match", "weight": 2.0},
        {"name": "length_penalty", "weight": 0.5, "kwargs": {"max_length": 8, "buffer_length": 4}},
    ]
}


def test_the_run_scorer_is_the_weighted_sum_of_the_sections_functions() -> None:
    scorer = build_reward_scorer("reward", SECTION)
    assert isinstance(scorer, FunctionScorer)
    assert [w.call.label for w in scorer.functions] == ["exact_match", "length_penalty"]
    alone = [
        build_reward_scorer("reward", {"functions": [{**f, "weight": 1.0}]}).score(
            ["p", "p"], ["#### 5", "the answer is #### 7 ok"], {"answer": ["5", "8"]}
        )[0]
        for f in SECTION["functions"]
    ]
    scores, metrics = scorer.score(
        ["p", "p"], ["#### 5", "the answer is #### 7 ok"], {"answer": ["5", "8"]}
    )
    # each function's raw score (exact_match: 1 then 0), weighted, summed
    assert metrics["exact_match"] == 0.5
    assert scores == pytest.approx([2 * a + 0.5 * b for a, b in zip(*alone, strict=True)])
    assert alone[1][1] < 0  # the long response is penalised
    assert scores[0] > scores[1]


def test_without_the_plugin_a_run_naming_functions_gets_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "rewards")
    reset_plugin_manager()
    with pytest.raises(HfsdkError) as info:
        build_reward_scorer("reward", SECTION)
    assert str(info.value).startswith(
        "scoring reward.functions (the reward runtime) comes with hfsdk-plugin-rewards, whose "
        "plugin 'rewards' is disabled here; unset it in HFSDK_DISABLE_PLUGINS"
    )


def test_the_preflight_check_refuses_a_function_the_columns_cannot_feed(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "def needs_gold(prompts, responses, gold):\n    return [0.0] * len(responses)\n"
    )
    scorer = build_reward_scorer(
        "cost", {"functions": [{"name": f"{tmp_path}/mine.py:needs_gold"}]}
    )
    prepared = types.SimpleNamespace(
        row_columns=("raw_prompt", "answer"), reward_scorers={"cost": scorer}, val_loader=None
    )
    with pytest.raises(HfsdkError, match=r"needs_gold' needs 'gold', which is neither a dataset"):
        check_signatures(None, None, prepared)
    prepared.row_columns = ("raw_prompt", "answer", "gold")
    assert check_signatures(None, None, prepared) is None


def test_an_unknown_style_is_refused_when_the_config_resolves() -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"'reward.functions\[0\].style': .*style='nope'"):
        load_run_config("grpo", None, ["reward.functions=[{name: exact_match, style: nope}]"])


@pytest.mark.heavy
def test_hfsdk_run_without_the_plugin_exits_2_with_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hfsdk.core.cli.main import main

    (tmp_path / "mine.py").write_text(
        "def brevity(prompts, responses):\n    return [1.0 / (1 + len(r)) for r in responses]\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "rewards")
    reset_plugin_manager()
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        main(["run", "--algo", "grpo", "reward.functions=[{name: mine.py:brevity}]",
              "--run-dir", str(run_dir)])  # fmt: skip
    out, err = capsys.readouterr()
    assert info.value.code == 2, out + err
    assert "Traceback" not in out + err
    lines = [line for line in (out + err).splitlines() if "hfsdk-plugin-rewards" in line]
    assert len(lines) == 1 and "'rewards' is disabled here" in lines[0], out + err
    assert not run_dir.exists()
