"""Path-valued config keys: a relative path that exists is recorded absolute, so a run's
config.yaml names the same files from any working directory; a resume of a run recorded
before (relative paths) from its launch directory is still the same config."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.config.paths import absolute_if_exists
from hfsdk.core.trainer.run_directory import config_changes


@pytest.fixture
def launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory, holding ``rel.jsonl``, ``r.py``, ``c.yaml`` and files named like
    a cluster preset (``auto``) and a registered reward function (``exact_match``)."""
    for name in ("rel.jsonl", "r.py", "c.yaml", "auto", "exact_match"):
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_existing_relative_paths_are_recorded_absolute(launch: Path) -> None:
    config = load_run_config(
        "grpo",
        None,
        [
            "data.train_files=[rel.jsonl]",
            "data.val_files=[rel.jsonl, missing.jsonl]",
            "reward.functions=[{name: r.py:score}, {name: exact_match}]",
            "placement.cluster=c.yaml",
        ],
    )
    data = config.to_dict()
    assert data["data"]["train_files"] == [str(launch / "rel.jsonl")]
    # A path that does not exist is left as given: its loader's error names it as written.
    assert data["data"]["val_files"] == [str(launch / "rel.jsonl"), "missing.jsonl"]
    names = [f["name"] for f in data["reward"]["functions"]]
    assert names == [f"{launch / 'r.py'}:score", "exact_match"]
    assert data["placement"]["cluster"] == str(launch / "c.yaml")


def test_names_that_are_not_paths_are_left_as_given(launch: Path) -> None:
    # A cluster preset stays a preset even beside a file of its name; a module spec is no file.
    config = load_run_config("grpo", None, ["reward.functions=[{name: 'my.module:fn'}]"])
    assert config.placement.cluster == "auto"
    assert config.reward.functions[0].name == "my.module:fn"
    assert absolute_if_exists("Org/model") == "Org/model"
    assert absolute_if_exists("missing.py:fn") == "missing.py:fn"
    assert absolute_if_exists("/abs/x.jsonl") == "/abs/x.jsonl"
    assert absolute_if_exists(None) is None


def test_a_run_recorded_with_relative_paths_resumes_from_its_launch_directory(
    launch: Path,
) -> None:
    overrides = ["data.train_files=[rel.jsonl]", "reward.functions=[{name: r.py:score}]"]
    config = load_run_config("grpo", None, overrides)
    recorded = config.to_dict()  # as a run before this change recorded it: paths as given
    recorded["data"]["train_files"] = ["rel.jsonl"]
    recorded["reward"]["functions"][0]["name"] = "r.py:score"
    assert config_changes(recorded, config) == []
    (launch / "other.jsonl").write_text("")
    other = load_run_config("grpo", None, ["data.train_files=[other.jsonl]", overrides[1]])
    assert config_changes(recorded, other) == ["data.train_files"]


def test_multi_turn_function_specs_are_recorded_with_absolute_files(launch: Path) -> None:
    if "multi_turn" not in load_run_config("grpo", None, []).to_dict()["rollout"]:
        pytest.skip("the agents plugin (rollout.multi_turn) is not installed")
    (launch / "r.py").write_text(TOOLS)
    file = launch / "r.py"
    tools = "rollout.multi_turn.tools=[r.py:add, {fn: r.py:add, name: plus}]"
    multi_turn = load_run_config("grpo", None, [tools]).to_dict()["rollout"]["multi_turn"]
    assert multi_turn["tools"] == [f"{file}:add", {"fn": f"{file}:add", "name": "plus"}]
    agent = load_run_config("grpo", None, ["rollout.multi_turn.agent=r.py:agent"])
    assert agent.to_dict()["rollout"]["multi_turn"]["agent"] == f"{file}:agent"


TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def agent(base_url, row):
    return 1.0
'''
