"""Rank side of ``test_tied_rollout.py``: greedy responses of a tied model, per dtype and decoder.

Also the vLLM-reload fault check's rank side: :func:`failing_reload` makes one
rank's consumer of ``actor.hf_weights()`` fail halfway and reports what each
rank raised (and how long it took), under the shared agreement helper.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common.rollout.agreement import on_every_rank
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig


def greedy(path: str, prompts: dict, dtype: str, decoder: str, width: int) -> torch.Tensor:
    """This rank's greedy responses (the prompts are split across the ranks)."""
    import torch.distributed as dist

    actor = ActorEngine(
        FSDPRoleConfig(model_path=path, device="cpu", dtype=dtype),  # type: ignore[arg-type]
        role="actor",
    )
    rollout = HFRollout(HFRolloutConfig(max_response_length=width, decoder=decoder), actor)  # type: ignore[arg-type]
    world = dist.get_world_size() if dist.is_initialized() else 1
    rank = dist.get_rank() if dist.is_initialized() else 0
    part = Batch.from_dict(tensors=prompts).chunk(world)[rank]
    return rollout.generate_sequences(part, greedy=True)["responses"]


def run(rank: int, world: int, path: str, prompts: dict, cases: list, width: int) -> dict:
    """Every (dtype, decoder) case in the same processes."""
    return {case: greedy(path, prompts, *case, width) for case in cases}


def failing_reload(rank: int, world: int, path: str) -> dict[str, Any]:
    """Rank 1's engine 'fails' after three weights; every rank must raise, none may hang."""
    actor = ActorEngine(FSDPRoleConfig(model_path=path, device="cpu"), role="actor")
    weights = actor.hf_weights()

    def reload() -> int:
        loaded = 0
        for _ in weights:
            loaded += 1
            if rank == 1 and loaded == 3:
                raise RuntimeError("injected: the engine rejected a weight")
        return loaded

    def drain() -> None:
        for _ in weights:
            pass

    started = time.perf_counter()
    try:
        on_every_rank(reload, what="reloading the engine", group=actor.dp.actor_group, drain=drain)
        error = None
    except Exception as exc:  # the test inspects what each rank raised
        error = f"{type(exc).__name__}: {exc}"
    # Still in step afterwards: a collective right after the failure completes on both ranks.
    import torch.distributed as dist

    probe = torch.ones(1)
    dist.all_reduce(probe)
    return {"error": error, "seconds": time.perf_counter() - started, "probe": float(probe)}
