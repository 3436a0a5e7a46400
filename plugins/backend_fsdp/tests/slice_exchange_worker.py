"""Rank side of ``test_tp_slices.py``: the real slice exchange over FSDP dim-0 shards."""

from __future__ import annotations

from typing import Any

import torch

from hfsdk_backend_fsdp.tp_exchange import SliceExchange, SliceStats
from hfsdk_backend_fsdp.tp_slices import fsdp_rows, tp_index


def run(rank: int, world: int, state: dict[str, torch.Tensor], tg: int) -> dict[str, Any]:
    """This rank's tensor-parallel slices, exchanged from every rank's rows of ``state``."""
    exchange = SliceExchange(
        group=None, world=world, rank=rank, tg=tg, dtype=torch.float32, device=torch.device("cpu")
    )
    stats = SliceStats()
    slices = {}
    for name, full in state.items():
        start, stop = fsdp_rows(full.shape[0], world, rank)
        slices[name] = exchange.exchange(name, full[start:stop].clone(), tuple(full.shape), stats)
    return {"tp_rank": tp_index(rank, world, tg), "slices": slices}
