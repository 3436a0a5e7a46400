"""The prompts of a generation tensor-parallel replica: pooled from its ranks, handed back.

Every rank of a replica of ``tg`` ranks gets its own share of the batch, but
the ranks decode together (``TPDecoder``'s collectives), so they must decode
the same rows: :meth:`RowPool.prompt_rows` gathers every rank's rows (left
padded to one width, in tensor-rank order) and :meth:`RowPool.own_rows`
cuts this rank's rows back out of what the replica decoded. Used by the fsdp
actor's generation shards and the tensor-parallel rollout replicas alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


class RowPool:
    """Pools rows over ``tp_group`` (``tg`` ranks, this one ``tp_rank``); one pooling at a time."""

    def __init__(self, *, tg: int, tp_rank: int, tp_group: Any) -> None:
        self.tg, self.tp_rank, self.tp_group = tg, tp_rank, tp_group
        self._counts: list[int] = []

    def prompt_rows(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pad_id: int,
        per_row: Sequence[torch.Tensor] = (),
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """The rows of every rank of this replica, left-padded to one width.

        ``per_row`` tensors (one row per prompt, same width on every rank) are
        concatenated alongside; returns ``(input_ids, attention_mask, per_row)``.
        """
        import torch.distributed as dist

        shares: list[Any] = [None] * self.tg
        mine = (input_ids.cpu(), attention_mask.cpu(), [t.cpu() for t in per_row])
        dist.all_gather_object(shares, mine, group=self.tp_group)
        width = max(ids.shape[1] for ids, _, _ in shares)
        all_ids, all_masks = [], []
        for ids, mask, _ in shares:
            extra = width - ids.shape[1]
            all_ids.append(torch.nn.functional.pad(ids, (extra, 0), value=pad_id))
            all_masks.append(torch.nn.functional.pad(mask, (extra, 0), value=0))
        self._counts = [len(ids) for ids, _, _ in shares]
        rows = [torch.cat([share[2][i] for share in shares]) for i in range(len(per_row))]
        return torch.cat(all_ids), torch.cat(all_masks), rows

    def own_rows(self, columns: list[torch.Tensor]) -> list[torch.Tensor]:
        """This rank's rows of each pooled column (its share, in the order it gave them)."""
        return [column.split(self._counts)[self.tp_rank] for column in columns]


class PooledRowsShards:
    """``GenerationShards.prompt_rows`` / ``own_rows`` through a :class:`RowPool` (``self.rows``).

    Mixed into the generation shards whose replicas pool their prompts (the fsdp
    actor's tensor-parallel generation, the rollout pool's replicas).
    """

    rows: RowPool

    def prompt_rows(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pad_id: int,
        per_row: Sequence[torch.Tensor] = (),
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """The prompts of every rank of this replica, left-padded to one width."""
        return self.rows.prompt_rows(input_ids, attention_mask, pad_id, per_row)

    def own_rows(self, columns: list[torch.Tensor]) -> list[torch.Tensor]:
        """This rank's rows of what the replica decoded (in the order it gave them)."""
        return self.rows.own_rows(columns)
