"""fsdp ``offload``: FSDP2 CPU offload on a GPU (same numbers), a documented no-op on CPU."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from hfsdk import position_ids_from_mask
from hfsdk.core.batch import Batch
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.sharding import is_sharded, offload_enabled
from hfsdk_policy_losses.losses import reinforce_loss


def _batch(vocab: int) -> Batch:
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(3, vocab, (4, 10), generator=generator)
    mask = torch.ones_like(ids)
    response_mask = torch.ones(4, 4, dtype=torch.long)
    return Batch.from_dict(
        tensors={
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": position_ids_from_mask(mask),
            "responses": ids[:, 6:],
            "response_mask": response_mask,
            "advantages": torch.randn(4, 4, generator=generator),
        }
    )


def _actor(model_dir: Path, device: str, offload: bool) -> ActorEngine:
    config = FSDPRoleConfig(
        model_path=str(model_dir),
        device=device,  # type: ignore[arg-type]
        offload=offload,
        mini_batch_size=4,
        micro_batch_size=4,
        optim=OptimConfig(lr=1e-2),
    )
    return ActorEngine(config, role="actor")


def test_offload_on_cpu_is_a_no_op_with_one_info_line(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="hfsdk"):
        assert offload_enabled(True, "cpu", "actor") is False
        actor = _actor(model_dir, "cpu", offload=True)
    lines = [r.getMessage() for r in caplog.records if "offload" in r.getMessage()]
    assert len(lines) == 2 and lines[0].startswith("actor.offload: the role computes on the CPU")
    assert not is_sharded(actor.module)
    assert offload_enabled(True, "cuda", "actor") is True
    assert offload_enabled(False, "cuda", "actor") is False
    batch = _batch(actor.module.config.vocab_size)
    plain = _actor(model_dir, "cpu", offload=False)
    objective = ActorObjective(policy_loss=reinforce_loss)
    for engine in (actor, plain):
        engine.update_actor(batch, objective)
    for (name, a), (_, b) in zip(
        actor.module.named_parameters(), plain.module.named_parameters(), strict=True
    ):
        assert torch.equal(a, b), name


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_offload_on_gpu_keeps_shards_on_the_host_with_the_same_numbers(model_dir: Path) -> None:
    import torch.distributed as dist

    started = not dist.is_initialized()
    if started:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        dist.init_process_group(
            "cpu:gloo,cuda:nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1
        )
    try:
        objective = ActorObjective(policy_loss=reinforce_loss)
        offloaded = _actor(model_dir, "cuda", offload=True)
        assert is_sharded(offloaded.module)
        # The shards (and so the optimizer state) live in host memory.
        assert all(p.to_local().device.type == "cpu" for p in offloaded.module.parameters())
        torch.cuda.reset_peak_memory_stats()
        batch = _batch(offloaded.module.config.vocab_size)
        before = offloaded.compute_log_prob(batch)["old_log_probs"]
        offloaded.update_actor(batch, objective)
        after = offloaded.compute_log_prob(batch)["old_log_probs"]
        on_gpu = _actor(model_dir, "cuda", offload=False)
        torch.testing.assert_close(on_gpu.compute_log_prob(batch)["old_log_probs"], before)
        on_gpu.update_actor(batch, objective)
        # float32 on both; the optimizer step runs on the CPU instead of the GPU: rounding only.
        torch.testing.assert_close(
            on_gpu.compute_log_prob(batch)["old_log_probs"], after, atol=1e-4, rtol=1e-4
        )
        assert (after - before).abs().max() > 1e-3
    finally:
        if started:
            dist.destroy_process_group()
