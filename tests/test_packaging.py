"""Packaging: every distribution builds, and one plugin installs into a fresh venv alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Build from a copy: setuptools leaves build/ and *.egg-info/ beside the sources.
IGNORED = shutil.ignore_patterns(
    ".git", ".venv*", "runs", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
)


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.heavy
@pytest.mark.slow
def test_grpo_plugin_installs_alone_with_its_backend(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    distributions = [
        source,
        *sorted(p.parent for p in (source / "plugins").glob("*/pyproject.toml")),
    ]
    wheels = tmp_path / "wheels"
    for dist in distributions:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "-w",
                str(wheels),
                str(dist),
            ]
        )
    names = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    # one wheel per distribution of the repository: the core and every plugin directory
    expected = ["hfsdk"] + [
        tomllib.loads(p.read_text())["project"]["name"].replace("-", "_")
        for p in (source / "plugins").glob("*/pyproject.toml")
    ]
    assert names == sorted(expected)
    assert {"hfsdk_plugin_grpo", "hfsdk_plugin_backend_fsdp", "hfsdk_backend_common"} <= set(names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    # torch first and pinned, exactly as the README's setup does.
    _run([str(python), "-m", "pip", "install", "--quiet", "torch==2.13.0"])
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--find-links",
            str(wheels),
            "hfsdk-plugin-grpo",
        ]
    )

    result = _run([str(venv / "bin" / "hfsdk"), "plugins", "--json"])
    plugins = {p["name"]: p for p in json.loads(result.stdout)}
    assert plugins["grpo"]["status"] == "loaded"
    assert plugins["backend_fsdp"]["status"] == "loaded"
    assert plugins["backend_fsdp"]["distribution"] == "hfsdk-plugin-backend-fsdp"
    # The shared home of what backends have in common, pulled in by the fsdp backend;
    # it registers the default `hf` rollout.
    assert plugins["backend_common"]["status"] == "loaded"
    # The built-in task, the prompt datasets, the standard rewards (with their sandbox) and
    # generation ahead of training (trainer.pipeline: one_step_off) come with the algorithm.
    for name in ("tasks", "rewards", "sandbox", "prompt_datasets", "pipelines"):
        assert plugins[name]["status"] == "loaded", plugins.get(name)
    assert "ppo" not in plugins  # only what grpo depends on was installed
    # ... and that is enough to resolve (and so to run) a GRPO config
    shown = _run([str(venv / "bin" / "hfsdk"), "config", "show", "--algo", "grpo"])
    assert "policy_loss: ppo_clip" in shown.stdout
