"""LoRA at fsdp dp 2 (two gloo processes) trains what one process trains."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig

sys.path.insert(0, str(Path(__file__).parent))
from gloo_ranks import run_ranks
from lora_steps import adapter_tensors, grpo_steps, lora_actor, with_advantages

pytestmark = pytest.mark.distributed

WORKER = Path(__file__).with_name("lora_two_rank_worker.py")
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]
KEYS = ["input_ids", "attention_mask", "position_ids", "responses", "response_mask", "advantages"]


def test_lora_grpo_steps_at_dp2_equal_one_process(
    model_dir: Path, make_prompts: Callable[..., Batch], tmp_path: Path
) -> None:
    actor = lora_actor(str(model_dir))
    torch.manual_seed(0)
    rollout = HFRollout(HFRolloutConfig(max_response_length=5, n=2, temperature=1.0), actor)
    batch = rollout.generate_sequences(make_prompts(PROMPTS))
    uids = list(batch.non_tensors["uid"])
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.5, 0.0])
    batch = with_advantages(batch, rewards, uids)
    tensors = {k: batch[k] for k in KEYS}
    torch.save({"model": str(model_dir), "batch": tensors}, tmp_path / "inputs.pt")

    # One process.
    base = Batch.from_dict(tensors=tensors)
    initial = actor.compute_log_prob(base)["old_log_probs"]
    grpo_steps(actor, base)
    expected = actor.compute_log_prob(base)["old_log_probs"]
    expected_ref = actor.compute_ref_log_prob(base)["ref_log_probs"]
    expected_merged = {k: v.clone() for k, v in actor.hf_weights()}
    expected_adapters = adapter_tensors(actor)

    run_ranks(WORKER, tmp_path, timeout=300, python_args=("-W", "ignore"))
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]

    assert all(r["base_unchanged"] for r in results)
    # The policy moved (so the comparison below can fail), and dp 2 moved it the same way.
    assert (expected - initial).abs().max() > 0.05
    got = torch.cat([r["log_probs"] for r in results])
    # float32, gradients reduced over two ranks instead of summed in one: rounding only.
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(torch.cat([r["ref_log_probs"] for r in results]), expected_ref)
    for name, value in expected_adapters.items():
        torch.testing.assert_close(results[0]["adapters"][name], value, atol=1e-5, rtol=1e-4)
    merged = results[0]["merged"]
    assert merged.keys() == expected_merged.keys()
    assert not any("lora" in k or "base_layer" in k for k in merged)
    for name, value in expected_merged.items():
        torch.testing.assert_close(merged[name], value, atol=1e-5, rtol=1e-4)
    # The dp-2 checkpoint (adapters only) resumes in one process.
    resumed = lora_actor(str(model_dir))
    resumed.load_checkpoint(tmp_path / "ckpt")
    torch.testing.assert_close(
        resumed.compute_log_prob(base)["old_log_probs"], expected, atol=1e-4, rtol=1e-4
    )
