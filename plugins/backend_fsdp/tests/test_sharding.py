"""FSDP2 across two gloo processes gives the single-process results.

The single-process engine (no torch.distributed) is the reference; two ranks
each take half of the batch. Log-probs, the weights after one ``update_actor``
step, greedy generation under gathered weights, checkpoints (broadcast from
rank 0) and the HF export must all agree.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from hfsdk.core.batch import Batch
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.sharding import data_parallel, gathered, is_sharded
from hfsdk_policy_losses.losses import reinforce_loss

sys.path.insert(0, str(Path(__file__).parent))
from gloo_ranks import run_ranks

WORKER = Path(__file__).with_name("two_rank_worker.py")
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]


def test_without_torch_distributed_nothing_is_sharded(model_dir: Path) -> None:
    dp = data_parallel()
    assert (dp.distributed, dp.size, dp.rank) == (False, 1, 0)
    actor = ActorEngine(FSDPRoleConfig(model_path=str(model_dir)), role="actor")
    assert not is_sharded(actor.module)
    with gathered(actor.module) as module:
        assert module is actor.module


@pytest.mark.distributed
def test_two_ranks_match_one_process(
    model_dir: Path, make_prompts: Callable[..., Batch], tmp_path: Path
) -> None:
    settings = {"model_path": str(model_dir), "mini_batch_size": 8, "micro_batch_size": 2}
    optim = {"lr": 1e-3}
    config = FSDPRoleConfig(**settings, optim=OptimConfig(**optim))  # type: ignore[arg-type]
    actor = ActorEngine(config, role="actor")
    prompts = make_prompts(PROMPTS)
    sampled = HFRollout(HFRolloutConfig(max_response_length=5, n=2, temperature=0.7), actor)
    batch = sampled.generate_sequences(prompts)
    batch["advantages"] = torch.randn(8, 1) * batch["response_mask"]
    batch = batch.union(actor.compute_log_prob(batch))
    tensor_keys = [
        "input_ids",
        "attention_mask",
        "position_ids",
        "responses",
        "response_mask",
        "old_log_probs",
        "advantages",
    ]
    torch.save(
        {
            "config": settings,
            "optim": optim,
            "batch": {k: batch[k] for k in tensor_keys},
            "prompts": {k: prompts[k] for k in ("input_ids", "attention_mask")},
        },
        tmp_path / "inputs.pt",
    )

    # The reference, in this process.
    greedy = HFRollout(HFRolloutConfig(max_response_length=5), actor).generate_sequences(
        prompts, greedy=True
    )["responses"]
    log_probs = batch["old_log_probs"]
    actor.update_actor(batch, ActorObjective(policy_loss=reinforce_loss))
    after = actor.compute_log_prob(batch)["old_log_probs"]
    greedy_after = HFRollout(HFRolloutConfig(max_response_length=5), actor).generate_sequences(
        prompts, greedy=True
    )["responses"]
    assert not torch.equal(greedy_after, greedy)  # lr=1e-3 moves the greedy answers

    run_ranks(WORKER, tmp_path)
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]

    # Each rank holds about half of the weights.
    for result in results:
        assert result["local_numel"] <= result["full_numel"] // 2 + 200
    # Streamed (default) and fully gathered weights generate what one process does.
    torch.testing.assert_close(torch.cat([r["greedy"] for r in results]), greedy)
    torch.testing.assert_close(torch.cat([r["gathered_greedy"] for r in results]), greedy)
    # After update_actor the next rollout uses the new weights (fails on stale weights).
    torch.testing.assert_close(torch.cat([r["greedy_after"] for r in results]), greedy_after)
    full_bytes = sum(p.numel() * 4 for p in actor.module.parameters())
    for result in results:
        stats, counted = result["stream_stats"], result["counted"]
        # Streaming holds one FSDP unit at a time: peak extra memory is about one layer.
        assert counted["max_unsharded_units"] == 1
        assert result["all_at_once"] == stats["units"] > 2
        assert stats["full_bytes"] == full_bytes
        assert stats["peak_unit_bytes"] < full_bytes / 2
        assert stats["peak_unit_bytes"] <= max(result["layer_bytes"], stats["full_bytes"] // 3)
        assert stats["received_bytes"] == pytest.approx(full_bytes / 2, rel=0.01)
        metrics = result["rollout_metrics"]
        assert metrics["perf/reshard_bytes"] == pytest.approx(full_bytes / 2, rel=0.01)
        assert metrics["timing/reshard_s"] > 0
        assert metrics["perf/reshard_peak_extra_bytes"] < full_bytes / 2
    torch.testing.assert_close(
        torch.cat([r["log_probs"] for r in results]), log_probs, atol=1e-5, rtol=1e-5
    )
    # One update over two ranks (half the batch each) equals the update over the whole batch.
    assert results[1]["model"] == {}  # the full state dict lives on rank 0 only
    # Loaded once: rank 0 read the weights, rank 1 built on the meta device and got shards.
    assert results[0]["materialized_before_sharding"] == results[0]["full_numel"]
    assert results[1]["materialized_before_sharding"] == 0
    for name, value in actor.module.state_dict().items():
        torch.testing.assert_close(results[0]["model"][name], value, atol=1e-6, rtol=1e-5, msg=name)
    torch.testing.assert_close(
        torch.cat([r["after"] for r in results]), after, atol=1e-5, rtol=1e-5
    )
    # A checkpoint written by rank 0 and broadcast back restores every rank's shard.
    for result in results:
        torch.testing.assert_close(result["after_restore"], result["after"])
        # ... and a truncated shard fails on both ranks with the checkpoint named, none hangs
        assert "actor_dcp cannot be read" in result["corrupt_error"]
    # Each rank wrote its own shard; the checkpoint reloads at another world size (one process).
    assert (tmp_path / "ckpt" / "actor_dcp" / "__1_0.distcp").is_file()
    single = ActorEngine(config, role="actor")
    single.load_checkpoint(tmp_path / "ckpt")
    torch.testing.assert_close(
        single.compute_log_prob(batch)["old_log_probs"],
        torch.cat([r["after"] for r in results]),
        atol=1e-5,
        rtol=1e-5,
    )
    # The export from the sharded engine is the updated model.
    exported = AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"))
    with torch.no_grad():
        torch.testing.assert_close(
            exported(input_ids=batch["input_ids"]).logits,
            actor.module(input_ids=batch["input_ids"]).logits,
            atol=1e-5,
            rtol=1e-5,
        )
