"""The fsdp actor's generation shards at tensor-parallel size tg > 1 (the rollout contract's).

``actor.rollout_layout.tp = tg``: the actor's ``N`` data-parallel ranks form
``N/tg`` generation replicas of ``tg`` ranks (at stride ``N/tg``, so each
rank's FSDP shard lies inside its slice: :func:`~.tp_slices.tp_index`). For every rollout
each rank fetches only its megatron-format tensor-parallel slice of every
weight from the FSDP2 shards (:class:`~.tp_exchange.SliceExchange`, layer by
layer), the ranks of a replica pool their prompts and decode them together
with ``TPDecoder`` (the ``hf`` rollout's shard path), each rank keeps the
responses of its own prompts (so the batch contract holds per rank), and the
slice is dropped before training resumes. The training shards are only read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hfsdk import HfsdkError
from hfsdk_backend_common.hybrid.decoder import DecoderShape
from hfsdk_backend_common.hybrid.row_pool import PooledRowsShards, RowPool
from hfsdk_backend_common.hybrid.shards import GenerationShards
from hfsdk_backend_fsdp import sharding
from hfsdk_backend_fsdp.tp_exchange import SliceExchange, SliceStats
from hfsdk_backend_fsdp.tp_slices import (
    replica_ranks,
    tp_index,
    tp_support_problems,
    world_problem,
)

if TYPE_CHECKING:
    from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
    from hfsdk_backend_fsdp.actor import ActorEngine

logger = logging.getLogger(__name__)


def resolve_rollout_tp(layout: RolloutLayoutConfig, world: int, model: Mapping[str, Any]) -> int:
    """The fsdp actor's generation tensor-parallel size (1: the streaming ``hf`` rollout).

    ``layout.tp`` (default 1) must fit the actor's ranks and the model, else a
    one-line :class:`HfsdkError`. ``layout.planned_tp`` (``placement.mode:
    auto``) is not taken: the planner's layouts model megatron's tensor-parallel
    training, and the fsdp actor's default must stay the full-model rollout.
    """
    if layout.pp != 1:
        raise HfsdkError(
            f"actor.rollout_layout.pp={layout.pp}: the fsdp actor generates without pipeline "
            "stages; use pp: 1 (the default)"
        )
    if layout.planned_tp not in (None, layout.tp or 1):
        logger.info(
            "placement: auto planned rollout tp=%s; the fsdp actor keeps "
            "actor.rollout_layout.tp=%s",
            layout.planned_tp,
            layout.tp or 1,
        )
    tg = layout.tp or 1
    if tg == 1:
        return 1
    problem = world_problem(tg, world) or next(iter(tp_support_problems(model, tg)), None)
    if problem is not None:
        raise HfsdkError(problem)
    return tg


class SliceShards(PooledRowsShards, GenerationShards):
    """The fsdp actor's generation shards at tensor-parallel size ``tg`` (built once).

    Every data-parallel rank of the actor takes part in every call (the slice
    exchange is collective over the group, decoding over each replica). The
    ranks of a replica pool their prompts (:meth:`prompt_rows`) and each keeps
    the responses of its own (:meth:`own_rows`).
    """

    pg = 1
    stages = None

    def __init__(self, actor: ActorEngine, *, tg: int) -> None:
        dp = actor.dp
        problem = world_problem(tg, dp.size)
        if problem is not None or tg < 2:
            raise HfsdkError(problem or f"SliceShards needs tg >= 2, got tg={tg}")
        if not sharding.is_sharded(actor.module):
            raise HfsdkError(
                "actor.rollout_layout.tp > 1 needs the actor under FSDP2 (a process group)"
            )
        model = actor.module.config
        problems = tp_support_problems(model.to_dict(), tg)
        if problems:
            raise HfsdkError(problems[0])
        if dp.size != dist.get_world_size():
            raise HfsdkError(
                "actor.rollout_layout.tp > 1 needs the actor's data-parallel group to span the "
                "torch.distributed world; run the actor in its own worker group"
            )
        self.actor = actor
        self.tg = tg
        self.tp_rank = tp_index(dp.rank, dp.size, tg)
        # new_group is collective over the world: every rank creates every replica's group.
        self.tp_group: Any = None
        self.tp_ranks: tuple[int, ...] = ()
        for replica in range(dp.size // tg):
            ranks = replica_ranks(replica, dp.size, tg)
            members = [dist.get_global_rank(dp.group, r) for r in ranks]
            group = dist.new_group(members)
            if dp.rank in ranks:
                self.tp_group, self.tp_ranks = group, tuple(members)
        self.shape = DecoderShape.from_hf_config(model)
        self.exchange = SliceExchange(
            group=dp.group, world=dp.size, rank=dp.rank, tg=tg, dtype=actor.compute_dtype,
            device=actor.device,
        )  # fmt: skip
        self.last_slices = SliceStats()
        self.rows = RowPool(tg=tg, tp_rank=self.tp_rank, tp_group=self.tp_group)
        self._started = 0.0

    def weights(self) -> dict[str, torch.Tensor]:
        """This rank's megatron-format slices, exchanged from the FSDP shards (layer by layer)."""
        module = self.actor.module
        for unit in sharding.fsdp_units(module):
            unit.reshard()  # a ZeRO-2 forward may have left units gathered: read the shards
        stats = SliceStats()
        shard = self.exchange.generation_shard(
            module, self.shape.num_layers, self.shape.num_kv_heads, stats
        )
        self.last_slices = stats
        return shard

    def release(self) -> None:
        """Nothing is cached: the caller drops the slices it got from :meth:`weights`."""

    def metrics(self) -> dict[str, float]:
        """The last exchange's cost on this rank."""
        return self.last_slices.metrics()
