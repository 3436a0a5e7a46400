"""The example algorithm: its estimator by hand, and installed, `hfsdk run --algo` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

PACKAGE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PACKAGE))  # the estimator test runs without installing


def test_batch_mean_advantages_by_hand() -> None:
    from hfsdk_algo_example.advantages import BatchMeanConfig, compute_batch_mean_advantages

    rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    result = compute_batch_mean_advantages(
        token_level_rewards=rewards, response_mask=mask, config=BatchMeanConfig()
    )
    # scores 1, 0, 0.5: baseline 0.5, advantages 0.5, -0.5, 0 on valid tokens only.
    expected = torch.tensor([[0.5, 0.5, 0.0], [-0.5, -0.5, -0.5], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(result.advantages, expected)
    assert float(result.extras["baseline"]) == pytest.approx(0.5)


def _pip(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"pip {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.mark.heavy  # a pip install and uninstall around the run
@pytest.mark.slow
@pytest.mark.distributed
def test_installed_algorithm_runs_on_the_default_task(tmp_path: Path) -> None:
    _pip("install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(PACKAGE))
    try:
        hfsdk = Path(sys.executable).with_name("hfsdk")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        run_dir = tmp_path / "run"
        result = subprocess.run(
            [
                str(hfsdk),
                "run",
                "--algo",
                "reinforce_mean",
                "--run-dir",
                str(run_dir),
                "--quiet",
                "trainer.total_steps=2",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        listed = subprocess.run(
            [str(hfsdk), "list", "algorithms"], capture_output=True, text=True, env=env
        ).stdout
    finally:
        _pip("uninstall", "--quiet", "--yes", "hfsdk-algo-example")
    assert "reinforce_mean" in listed and "[algo_example]" in listed
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert 0.0 <= row["reward/mean"] <= 1.0
        assert row["reinforce_mean/baseline"] == pytest.approx(row["reward/mean"], abs=0.2)
        assert "timing/update_actor_s" in row and row["actor/grad_norm"] > 0
    import yaml

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    # The plugin's own preset filled the default task's settings.
    assert config["algorithm"]["n_samples_per_prompt"] == 4
    assert config["actor"]["mini_batch_size"] == 32 and config["rollout"]["backend"] == "hf"
