"""GRPO raises FrozenLake's success rate (averaged over seeds: one seed's curve is noisy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy

SEEDS = (1, 2)


def _rewards(run_dir: Path, seed: int) -> list[float]:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer
    from hfsdk_agents.environments.frozen_lake_build import ensure_frozen_lake_assets
    from hfsdk_agents.environments.frozen_lake_task import frozen_lake_preset

    base = frozen_lake_preset(ensure_frozen_lake_assets())
    overrides = ["trainer.total_steps=12", f"trainer.seed={seed}"]
    Trainer(load_run_config("grpo", None, overrides, base=base), run_dir, quiet=True).fit()
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["reward/mean"] for line in lines]


def test_grpo_raises_the_success_rate(tmp_path: Path) -> None:
    # Measured on 2 shared CPU cores (12 steps, lr 1e-3): first 3 steps -> last 4 steps rose by
    # +0.16, +0.24 and +0.18 for seeds 1, 2, 3 (warm start: about 0.15 success).
    gains = []
    for seed in SEEDS:
        rewards = _rewards(tmp_path / f"seed{seed}", seed)
        gains.append(sum(rewards[-4:]) / 4 - sum(rewards[:3]) / 3)
    assert sum(gains) / len(gains) > 0.08, gains
