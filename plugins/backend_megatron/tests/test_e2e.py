"""End to end with Ray: GRPO on a tp=2 megatron actor learns; PPO at pp=2 resumes exactly.

The runs use the default task (its 4 attention heads split over tp=2), with its
model passed as ``actor.model_path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hfsdk import default_task_assets
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.heavy]

SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=2",
]


@pytest.fixture(scope="module")
def tp_model() -> str:
    """The default task's model (built once into the shared cache)."""
    return str(default_task_assets().model_dir)


def _megatron_actor(model: str, tp: int = 2, rollout_tp: int | None = None) -> list[str]:
    rollout = [f"actor.rollout_layout.tp={rollout_tp}"] if rollout_tp else []
    return [
        f"actor.model_path={model}",
        "actor.backend=megatron",
        f"actor.parallel.tp={tp}",
        *rollout,
        "reference.backend=megatron",
        f"reference.parallel.tp={tp}",
        "placement.pools.global.devices=2",
    ]


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def test_grpo_with_a_tp2_megatron_actor_learns(tmp_path: Path, tp_model: str) -> None:
    """Training at tp=2, generating at rollout tp=1 (two micro-DP replicas, 3D-HybridEngine)."""
    hfsdk = Path(sys.executable).with_name("hfsdk")
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [
            str(hfsdk),
            "run",
            "--algo",
            "grpo",
            "--run-dir",
            str(run_dir),
            "--quiet",
            *_megatron_actor(tp_model, rollout_tp=1),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 31))
    gain = _mean(rows[-5:], "reward/mean") - _mean(rows[:5], "reward/mean")
    assert gain >= 0.15, f"reward rose by only {gain:.3f}"
    # The rollout resharded tp=2 -> tp=1: each rank received the other's half.
    assert all(r["perf/reshard_bytes"] > 0 and r["timing/reshard_s"] > 0 for r in rows)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(run_dir / "checkpoints" / "step_30" / "actor_hf")
    assert model.config.num_attention_heads == 4


def test_ppo_with_a_tp2_megatron_actor_and_rollout_tp1_learns(
    tmp_path: Path, tp_model: str
) -> None:
    """PPO's default run with the actor trained at tp=2 and generating at tp=1."""
    overrides = [*_megatron_actor(tp_model, rollout_tp=1)]
    rows = Trainer(load_run_config("ppo", None, overrides), tmp_path / "ppo", quiet=True).fit()
    assert len(rows) == 30
    gain = _mean(rows[-5:], "reward/mean") - _mean(rows[:5], "reward/mean")
    assert gain >= 0.15, f"reward rose by only {gain:.3f}"
    assert all(r["perf/reshard_bytes"] > 0 for r in rows)


def _ppo_pp2(model: str, steps: int) -> list[str]:
    """PPO with actor, reference and critic all on megatron at pp=2 (one layout per process)."""
    return [
        *SMALL,
        f"actor.model_path={model}",
        *(f"{role}.backend=megatron" for role in ("actor", "reference", "critic")),
        *(f"{role}.parallel.pp=2" for role in ("actor", "reference", "critic")),
        "critic.mini_batch_size=4",
        "critic.micro_batch_size=2",
        "placement.pools.global.devices=2",
        f"trainer.total_steps={steps}",
    ]


def test_ppo_with_pp2_megatron_critic_resumes_exactly(tmp_path: Path, tp_model: str) -> None:
    """PPO end to end with a pp=2 megatron critic (and actor); 2 + resume 2 equals 4 straight."""
    from safetensors.torch import load_file

    def fit(run: str, steps: int) -> list[dict]:
        config = load_run_config("ppo", None, _ppo_pp2(tp_model, steps))
        return Trainer(config, tmp_path / run, quiet=True).fit()

    straight = fit("a", 4)
    fit("b", 2)
    resumed = fit("b", 4)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]
    keys = ("reward/mean", "actor/pg_loss", "actor/grad_norm", "critic/vf_loss", "critic/grad_norm")
    for a, b in zip(straight, resumed, strict=True):
        assert a["critic/grad_norm"] > 0
        for key in keys:
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["step"], key)
    critic_dir = tmp_path / "b" / "checkpoints" / "step_4" / "critic"
    files = sorted(p.name for p in critic_dir.iterdir())
    assert "critic_megatron_pp0_tp0.pt" in files and "critic_megatron_pp1_tp0.pt" in files

    def weights(run: str, step: int) -> dict:
        path = tmp_path / run / "checkpoints" / f"step_{step}" / "actor_hf" / "model.safetensors"
        return load_file(str(path))

    final_a, final_b = weights("a", 4), weights("b", 4)
    for name in final_a:
        assert (final_a[name] - final_b[name]).abs().max().item() < 1e-6, name
    early = weights("b", 2)
    assert any((early[n] - final_b[n]).abs().max().item() > 0 for n in early)
