"""The ``hf`` rollout of an fsdp actor at generation tensor-parallel size tg > 1.

``actor.rollout_layout.tp = tg``: the actor's ``N`` data-parallel ranks form
``N/tg`` generation replicas of ``tg`` ranks (at stride ``N/tg``, so each
rank's FSDP shard lies inside its slice: :func:`~.tp_slices.tp_index`). For every rollout
each rank fetches only its megatron-format tensor-parallel slice of every
weight from the FSDP2 shards (:class:`~.tp_exchange.SliceExchange`, layer by
layer), the ranks of a replica pool their prompts and decode them together
with ``TPDecoder``, each rank keeps the responses of its own
prompts (so the ``hf`` rollout's batch contract holds per rank), and the
slice is dropped before training resumes. The training shards are only read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hfsdk import Batch, HfsdkError
from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_fsdp import sharding
from hfsdk_backend_fsdp.hf_rollout import HFRollout
from hfsdk_backend_fsdp.tp_exchange import SliceExchange, SliceStats
from hfsdk_backend_fsdp.tp_slices import (
    replica_ranks,
    tp_index,
    tp_support_problems,
    world_problem,
)

if TYPE_CHECKING:
    from hfsdk import RolloutLayoutConfig
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
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


class TPSliceRollout(HFRollout):
    """``generate_sequences`` at tensor-parallel size ``tg`` over the FSDP actor's ranks.

    Every data-parallel rank of the actor must call it (the slice exchange is
    collective over the group, decoding over each replica).
    """

    def __init__(self, config: HFRolloutConfig, actor: ActorEngine, *, tg: int) -> None:
        super().__init__(config, actor)
        dp = actor.dp
        problem = world_problem(tg, dp.size)
        if problem is not None or tg < 2:
            raise HfsdkError(problem or f"TPSliceRollout needs tg >= 2, got tg={tg}")
        if not sharding.is_sharded(actor.module):
            raise HfsdkError("TPSliceRollout needs the actor under FSDP2 (a process group)")
        model = actor.module.config
        problems = tp_support_problems(model.to_dict(), tg)
        if problems:
            raise HfsdkError(problems[0])
        if dp.size != dist.get_world_size():
            raise HfsdkError(
                "actor.rollout_layout.tp > 1 needs the actor's data-parallel group to span the "
                "torch.distributed world; run the actor in its own worker group"
            )
        self.tg = tg
        self.tp_rank = tp_index(dp.rank, dp.size, tg)
        # new_group is collective over the world: every rank creates every replica's group.
        self.tp_group = None
        for replica in range(dp.size // tg):
            ranks = replica_ranks(replica, dp.size, tg)
            members = [dist.get_global_rank(dp.group, r) for r in ranks]
            group = dist.new_group(members)
            if dp.rank in ranks:
                self.tp_group, self.tp_ranks = group, tuple(members)
        self.decoder_shape = DecoderShape.from_hf_config(model)
        dtype = actor.compute_dtype if actor.config.dtype != "float32" else torch.float32
        self.exchange = SliceExchange(
            group=dp.group, world=dp.size, rank=dp.rank, tg=tg, dtype=dtype, device=actor.device
        )
        self.last_slices = SliceStats()

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Right-padded responses of this rank's prompts, decoded with its replica's."""
        started = time.perf_counter()
        module = self.actor.module
        for unit in sharding.fsdp_units(module):
            unit.reshard()  # a ZeRO-2 forward may have left units gathered: read the shards
        stats = SliceStats()
        shard = self.exchange.generation_shard(
            module, self.decoder_shape.num_layers, self.decoder_shape.num_kv_heads, stats
        )
        self.last_slices = stats
        try:
            ids, mask, counts = self._replica_prompts(prompts)
            decoder = TPDecoder(
                shard,
                self.decoder_shape,
                tg=self.tg,
                tp_rank=self.tp_rank,
                tp_group=self.tp_group,
                tp_ranks=self.tp_ranks,
            )
            responses = self._decode(decoder, ids, mask, greedy)
        finally:
            del shard  # the generation slice lives only for this call
        mine = responses.split(counts)[self.tp_rank]
        self.last_metrics = {**stats.metrics(), "timing/generate_s": time.perf_counter() - started}
        return mine, {}

    def _replica_prompts(self, prompts: Batch) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """The prompts of every rank of this replica, left-padded to one width, and their counts."""
        shares: list[Any] = [None] * self.tg
        mine = (prompts["input_ids"].cpu(), prompts["attention_mask"].cpu())
        dist.all_gather_object(shares, mine, group=self.tp_group)
        width = max(ids.shape[1] for ids, _ in shares)
        pad = self.tokenizer.pad_token_id
        all_ids, all_masks = [], []
        for ids, mask in shares:
            extra = width - ids.shape[1]
            all_ids.append(torch.nn.functional.pad(ids, (extra, 0), value=pad))
            all_masks.append(torch.nn.functional.pad(mask, (extra, 0), value=0))
        counts = [len(ids) for ids, _ in shares]
        return torch.cat(all_ids), torch.cat(all_masks), counts
