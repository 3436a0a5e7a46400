"""The example plugin, found through its entry point, drives `hfsdk run --task tool_use`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]


def _entry_point_dir(root: Path) -> Path:
    """A ``.dist-info`` for the package, found by importlib.metadata like an installed one."""
    info = root / "hfsdk_agent_example-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: hfsdk-agent-example\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text("[hfsdk]\nagent_example = hfsdk_agent_example.plugin\n")
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    paths = [
        str(PACKAGE),
        str(_entry_point_dir(tmp_path / "site")),
        os.environ.get("PYTHONPATH", ""),
    ]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "OMP_NUM_THREADS": "1",
    }


def _hfsdk(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys\nfrom hfsdk.core.cli.main import main\nsys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_the_configs_tool_entry_resolves_to_the_plugins_function(tmp_path: Path) -> None:
    code = (
        "from hfsdk_agents.tools import load_tools\n"
        "import yaml\n"
        f"entries = yaml.safe_load(open({str(PACKAGE / 'tool_use.yaml')!r}))"
        "['rollout']['multi_turn']['tools']\n"
        "(tool,) = load_tools(entries).values()\n"
        "print(tool.name, tool.fn.__module__, tool.fn.__name__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
    )
    assert result.stdout.split() == ["add", "hfsdk_agent_example.tools", "slow_add"], result.stderr


def test_the_tool_and_the_loop_are_listed_with_their_plugin(tmp_path: Path) -> None:
    env = _env(tmp_path)
    tools = _hfsdk(env, "list", "tools")
    assert tools.returncode == 0, tools.stderr
    assert "slow_add" in tools.stdout and "[agent_example]" in tools.stdout
    loops = _hfsdk(env, "list", "agent-loops")
    assert "traced_tool_loop" in loops.stdout and "[agent_example]" in loops.stdout


@pytest.mark.slow
@pytest.mark.heavy
def test_hfsdk_run_uses_the_plugin_tool_and_loop(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = _hfsdk(
        _env(tmp_path),
        "run",
        "--algo",
        "grpo",
        "--task",
        "tool_use",
        "--config",
        str(PACKAGE / "tool_use.yaml"),
        "--run-dir",
        str(run_dir),
        "--quiet",
        "trainer.total_steps=2",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in (run_dir / "rollouts" / "step_2.jsonl").open()]
    traced = [r["trajectory"]["extra"] for r in records]
    assert all("traced_calls" in e for e in traced)  # the plugin's loop ran every trajectory
    called = [(r, e) for r, e in zip(records, traced, strict=True) if e["traced_calls"]]
    assert called
    for record, extra in called:
        results = [x for s in record["trajectory"]["segments"] for x in s["tool_results"]]
        assert [x["content"] for x in results] == extra["tool_answers"]
        assert all(x["name"] == "add" for x in results if x["error"] != "malformed_call")
