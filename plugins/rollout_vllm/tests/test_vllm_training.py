"""Training runs with ``rollout.backend=vllm``: GRPO and ReMax learn, PPO resumes exactly.

Every step checks ``rollout/log_prob_diff_max``: the gap between the
log-probs vLLM sampled with and the actor's own. It stays at float noise only
if vLLM received the actor's weights after every update (stale weights give
gaps of order 1e-2 after the first step).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

IN_SYNC = 1e-4
"""Largest |vLLM − actor| log-prob of a sampled token when both hold the same weights."""


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def _assert_in_sync(rows: list[dict]) -> None:
    gaps = [r["rollout/log_prob_diff_max"] for r in rows]
    assert max(gaps) < IN_SYNC, gaps


@pytest.mark.heavy
def test_grpo_command_learns_with_the_actor_on_two_ranks(tmp_path: Path) -> None:
    """Two FSDP2 actor ranks, one vLLM engine each, both fed the gathered weights every step."""
    hfsdk = Path(sys.executable).with_name("hfsdk")
    run_dir = tmp_path / "run"
    command = [
        str(hfsdk), "run", "--algo", "grpo", "rollout.backend=vllm", "trainer.val_every=15",
        "placement.pools={train: {devices: 2}, ref: {devices: 1}}",
        "placement.roles={actor: train, reference: ref}",
    ]  # fmt: skip
    result = subprocess.run(
        [*command, "--run-dir", str(run_dir), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 31))
    _assert_in_sync(rows)  # covers both ranks' samples: stale or partial weights would show
    gain = _mean(rows[-5:], "reward/mean") - _mean(rows[:5], "reward/mean")
    assert gain >= 0.15, f"reward rose by only {gain:.3f}"
    validated = [r for r in rows if any(k.startswith("val/") for k in r)]
    assert [r["step"] for r in validated] == [15, 30]


@pytest.mark.heavy
def test_remax_learns(tmp_path: Path) -> None:
    config = load_run_config("remax", None, ["rollout.backend=vllm"])
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert len(rows) == 30
    _assert_in_sync(rows)
    assert all(0.0 <= r["reward/greedy_baseline_mean"] <= 1.0 for r in rows)
    gain = _mean(rows[-5:], "reward/mean") - _mean(rows[:5], "reward/mean")
    assert gain >= 0.15, f"reward rose by only {gain:.3f}"


PPO = [
    "rollout.backend=vllm",
    "trainer.total_steps=3",
    "trainer.save_every=1",
    "trainer.hf_export=every_save",  # the test compares step 1's exported weights too
    "data.batch_size=8",
]
COMPARED = ("reward/mean", "response_length/mean", "actor/pg_loss", "critic/vf_loss", "actor/kl")


def _weights(run_dir: Path, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(
        str(run_dir / "checkpoints" / f"step_{step}" / "actor_hf" / "model.safetensors")
    )


@pytest.mark.heavy
def test_ppo_runs_and_resumes_exactly(tmp_path: Path) -> None:
    """PPO end to end; a copy of the run cut back to step 1 resumes to the same steps 2–3."""
    straight_dir, resumed_dir = tmp_path / "straight", tmp_path / "resumed"
    straight = Trainer(load_run_config("ppo", None, PPO), straight_dir, quiet=True).fit()
    assert [r["step"] for r in straight] == [1, 2, 3]
    _assert_in_sync(straight)
    assert all("critic/vf_loss" in r for r in straight)

    shutil.copytree(straight_dir, resumed_dir)
    for step in (2, 3):
        shutil.rmtree(resumed_dir / "checkpoints" / f"step_{step}")
    resumed = Trainer(load_run_config("ppo", None, PPO), resumed_dir, quiet=True).fit()
    assert [r["step"] for r in resumed] == [1, 2, 3]
    for a, b in zip(straight[1:], resumed[1:], strict=True):
        for key in COMPARED:
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["step"], key)
    final_a, final_b = _weights(straight_dir, 3), _weights(resumed_dir, 3)
    for name in final_a:
        assert (final_a[name] - final_b[name]).abs().max().item() < 1e-6, name
    first = _weights(straight_dir, 1)
    assert any((first[n] - final_b[n]).abs().max().item() > 0 for n in first)


@pytest.mark.heavy
def test_in_process_run_shuts_the_engine_down_cleanly(tmp_path: Path) -> None:
    """One device: vLLM lives in the controller's process and is closed before its groups go."""
    hfsdk = Path(sys.executable).with_name("hfsdk")
    command = [str(hfsdk), "run", "--algo", "grpo", "rollout.backend=vllm",
               "trainer.total_steps=2", "--run-dir", str(tmp_path / "run"), "--quiet"]  # fmt: skip
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    # Without close() vLLM's exit hook raised on the already destroyed process group.
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    # Step 2 generated after the first reload: the engine was read back and verified.
    assert "sync/verified" not in rows[0] and rows[1]["sync/verified"] == 1.0


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (
            "vllm_drop:1",
            ("does not hold the actor's weights version 1", "1 of 15 tensor(s) differ"),
        ),
        ("vllm_stale:1", ("does not hold the actor's weights version 1", "differ from what was")),
        ("vllm_skip:1", ("holds the actor's weights version 0 but the actor is at version 1",)),
    ],
)
def test_a_faulty_reload_stops_the_run_with_one_line(
    tmp_path: Path, fault: str, says: tuple[str, ...]
) -> None:
    """The engine's reload after step 1 loses a tensor (``vllm_drop``), never reaches the
    engine's live weights (``vllm_stale``) or does not run (``vllm_skip``): the read-back,
    or for a skipped reload the engine's loaded version, catches it before step 2
    generates, and the run stops with one line naming it."""
    hfsdk = Path(sys.executable).with_name("hfsdk")
    command = [str(hfsdk), "run", "--algo", "grpo", "rollout.backend=vllm",
               "trainer.total_steps=2", "--run-dir", str(tmp_path / "run"), "--quiet"]  # fmt: skip
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HFSDK_FAULT_INJECT": fault},
    )  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert "WeightSyncMismatch: the vLLM engine " in errors[0], errors[0]
    for part in says:
        assert part in errors[0], errors[0]
