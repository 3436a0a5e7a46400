"""Install the example package into the running environment and select its function by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]

SELECT = """
import json
import hfsdk
from hfsdk_rewards import compute_rewards

entry = hfsdk.get_registry("reward_functions").get("keyword_bonus")
scores, metrics = compute_rewards(
    ["Name a fruit", "Name a colour"],
    ["An Apple", "blue"],
    {"keyword": ["apple", "red"]},
    {"functions": [{"name": "keyword_bonus", "weight": 2.0}]},
)
print(json.dumps({"plugin": entry.plugin, "scores": scores, "metrics": metrics}))
"""


def _pip(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"pip {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.mark.slow
def test_installed_plugin_is_selectable_by_name(tmp_path: Path) -> None:
    _pip("install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(PACKAGE))
    try:
        # A fresh interpreter: entry points are read when the plugin manager is first built.
        result = subprocess.run(
            [sys.executable, "-c", SELECT],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout.strip().splitlines()[-1])
    finally:
        _pip("uninstall", "--quiet", "--yes", "hfsdk-reward-example")
    assert report == {
        "plugin": "reward_example",
        "scores": [2.0, 0.0],
        "metrics": {"keyword_bonus": 0.5},
    }
