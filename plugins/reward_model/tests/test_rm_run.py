"""Reward model end to end on the default task, then a PPO run against the exported model."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

SEEDS = (0, 1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[list[dict], Path]]:
    """Per seed: the default reward-model run's metric rows and its exported model directory."""
    out = {}
    for seed in SEEDS:
        run_dir = tmp_path_factory.mktemp(f"rm{seed}") / "run"
        config = load_run_config("reward_model", None, [f"trainer.seed={seed}"])
        rows = Trainer(config, run_dir, quiet=True).fit()
        step = config.trainer.total_steps
        out[seed] = (rows, run_dir / "checkpoints" / f"step_{step}" / "reward_model_hf")
    return out


@pytest.mark.slow
@pytest.mark.heavy
def test_default_run_ranks_held_out_pairs(trained: dict[int, tuple[list[dict], Path]]) -> None:
    finals = []
    for rows, export in trained.values():
        accuracy = [r["val/pairwise_accuracy"] for r in rows if "val/pairwise_accuracy" in r]
        assert accuracy[0] < 0.7  # step 0, before training
        finals.append(accuracy[-1])
        assert "ForSequenceClassification" in (export / "config.json").read_text()
    # Measured over seeds 0-5 (docs/algorithms.md; 64 held-out pairs, one pair is 0.016):
    # 0.938, 0.891, 0.969, 0.938, 0.969, 0.953 — mean 0.943, lowest 0.891, and 0.914 for the
    # mean of seeds 0 and 1 (the lowest two-seed mean of the six). The bound sits 4 pairs
    # below that: an RM that stopped learning (0.45-0.56 untrained) still fails it.
    assert sum(finals) / len(finals) >= 0.85, f"held-out pairwise accuracy {finals}"


@pytest.mark.slow
@pytest.mark.heavy
def test_ppo_reward_rises_against_the_trained_reward_model(
    trained: dict[int, tuple[list[dict], Path]], tmp_path: Path
) -> None:
    export = trained[SEEDS[0]][1]
    config = load_run_config(
        "ppo", None, [f"reward.model.model_path={export}", "trainer.total_steps=16"]
    )
    rows = Trainer(config, tmp_path / "ppo", quiet=True).fit()
    reward = [r["reward/mean"] for r in rows]
    first, last = sum(reward[:4]) / 4, sum(reward[-4:]) / 4
    # Measured: the model's mean score went from -0.29 (steps 1-4) to +0.55 (steps 13-16).
    assert last - first >= 0.3, f"reward model score went {first:.3f} -> {last:.3f}"
