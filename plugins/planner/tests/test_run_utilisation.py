"""A run logs each stage's utilisation: its FLOPs over its own logged seconds and the peak."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from hfsdk.core.config import load_run_config
from hfsdk_planner.cluster import local
from hfsdk_planner.flops import forward_flops
from hfsdk_planner.model_spec import ModelSpec

ONE_THREAD_PEAK = 50e9
TWO_THREAD_PEAK = 80e9


def _profile(path: Path) -> Path:
    """A two-core CPU profile whose peak at two threads per device differs from one's."""
    cluster = attrs.evolve(
        local(),
        name="handmade",
        peak_flops=ONE_THREAD_PEAK,
        memory_bandwidth=10e9,
        peaks_measured=True,
        by_threads={2: {"peak_flops": TWO_THREAD_PEAK, "memory_bandwidth": 16e9}},
    ).with_devices(2)
    cluster.save(path)
    return path


def test_a_run_logs_mfu_equal_to_its_flops_over_its_seconds_over_the_peak(
    tmp_path: Path,
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from hfsdk import default_model_dir
    from hfsdk.core.trainer.trainer import Trainer

    profile = _profile(tmp_path / "cluster.yaml")
    config = load_run_config(
        "grpo",
        None,
        [
            "data.batch_size=4",
            "algorithm.n_samples_per_prompt=2",
            "actor.mini_batch_size=8",
            "trainer.total_steps=1",
            "trainer.loggers=[jsonl]",
            "trainer.worker_threads=2",
            f"placement.cluster={profile}",
        ],
    )
    threads = torch.get_num_threads()
    (row,) = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert torch.get_num_threads() == threads
    # The parameters the planner counts are the model's own (its config read by the planner).
    model = AutoModelForCausalLM.from_pretrained(default_model_dir())
    spec = ModelSpec.from_hf_config(model.config.to_dict())
    assert spec.num_params == sum(p.numel() for p in model.parameters())
    width = row["perf/sequence_width"]
    tokens = 8 * width  # 8 rows padded to the batch's width
    # The LM head runs at each row's response columns (the longest response) and one more.
    real = row.get("perf/tokens") or row["perf/throughput_tokens_per_s"] * row["timing/step_s"]
    prompt = real / 8 - row["response_length/mean"]
    longest = max(row["response_length/mean"], width - prompt)
    kept = min(config.rollout.max_response_length, longest) + 1
    forward = forward_flops(spec, tokens, head_tokens=min(tokens, 8 * kept))
    assert row["perf/worker_threads"] == 2
    # The run's device used two threads: the two-thread peak is the one it is measured against.
    update = 3 * forward / row["timing/update_actor_s"]
    assert row["perf/update_actor_flops_per_s"] == pytest.approx(update, rel=1e-9)
    assert row["perf/update_actor_mfu"] == pytest.approx(update / TWO_THREAD_PEAK, rel=1e-9)
    reference = forward / row["timing/ref_log_prob_s"]
    assert row["perf/ref_log_prob_mfu"] == pytest.approx(reference / TWO_THREAD_PEAK, rel=1e-9)
    assert "perf/old_log_prob_mfu" not in row  # on-policy: the pass was skipped
    assert row["perf/generation_bandwidth_util"] > 0 and row["perf/generation_mfu"] > 0


def _preparation_rate(pools: dict, roles: dict) -> float:
    from hfsdk_planner.run_plan import run_hardware, run_setup
    from hfsdk_planner.run_utilisation import stage_utilisation

    cfg = load_run_config("ppo").to_dict()
    cfg["placement"]["pools"], cfg["placement"]["roles"] = pools, roles
    setup = run_setup(cfg)
    row = {
        "response_length/mean": 4.0,
        "perf/tokens": 64 * 12.0,
        "timing/step_s": 1.0,
        "perf/sequence_width": 12.0,
    }
    used = stage_utilisation(setup, run_hardware(setup, "a100-80gb"), [row], {"preparation": 0.5})
    return used["preparation"].flops_per_s


def test_concurrent_passes_on_separate_pools_share_their_devices_rate() -> None:
    # The same passes on two devices: one pool of two, or the critic on a pool of its own.
    # The rate per device is their FLOPs over the two devices busy at once either way.
    together = _preparation_rate({"global": {"devices": 2}}, {})
    apart = _preparation_rate(
        {"a": {"devices": 1}, "b": {"devices": 1}},
        {"actor": "a", "reference": "a", "critic": "b"},
    )
    assert apart == pytest.approx(together)
