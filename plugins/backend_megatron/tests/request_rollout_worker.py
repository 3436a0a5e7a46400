"""Rank side of ``test_rollout_requests.py``: requests served with a tp = 2 megatron actor."""

from __future__ import annotations

import asyncio
from typing import Any

import hfsdk
from hfsdk import GenerationRequest


def megatron_requests(rank: int, world: int, path: str, prompts: list[list[int]],
                      width: int, tp: int = 2) -> dict[str, Any]:  # fmt: skip
    """Every rank enters ``serving()``; each serves the same greedy requests, all in flight."""
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig

    engine = MegatronEngine(
        MegatronRoleConfig(model_path=path, device="cpu", parallel=ParallelConfig(tp=tp)),
        role="actor",
        kind="actor",
    )
    rollout = hfsdk.build_rollout(HFRolloutConfig(max_response_length=width), engine)

    async def serve() -> list[Any]:
        return await asyncio.gather(*(
            rollout.generate_request(GenerationRequest(prompt_ids=p, max_new_tokens=width,
                                                       greedy=True))
            for p in prompts
        ))  # fmt: skip

    with rollout.serving():
        results = asyncio.run(serve())
        peak = rollout.request_server.stats.peak_batch
    return {
        "tokens": [list(r.token_ids) for r in results],
        "tg": rollout.shards.tg if rollout.shards is not None else None,
        "peak_batch": peak,
    }


def fsdp_requests(rank: int, world: int, path: str, prompts: list[list[int]],
                  width: int) -> dict[str, Any]:  # fmt: skip
    """An fsdp actor sharded over the ranks: each rank serves its own share of the prompts.

    The ranks send different numbers of requests (different step counts): only
    entering and leaving ``serving()`` is collective.
    """
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    actor = ActorEngine(FSDPRoleConfig(model_path=path, device="cpu"), role="actor")
    rollout = hfsdk.build_rollout(HFRolloutConfig(max_response_length=width), actor)
    mine = prompts[rank::world]

    async def serve() -> list[Any]:
        return await asyncio.gather(*(
            rollout.generate_request(GenerationRequest(prompt_ids=p, max_new_tokens=width,
                                                       greedy=True))
            for p in mine
        ))  # fmt: skip

    with rollout.serving():
        results = asyncio.run(serve())
    return {"rows": list(range(rank, len(prompts), world)),
            "tokens": [list(r.token_ids) for r in results]}  # fmt: skip
