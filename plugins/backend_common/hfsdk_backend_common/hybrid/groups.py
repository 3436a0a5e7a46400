"""torch.distributed process groups of the 3D-HybridEngine.

``new_group`` is collective over the whole world: every rank creates every
group in the same order and keeps the ones it belongs to.
"""

from __future__ import annotations

from typing import Any

import attrs

from hfsdk_backend_common.hybrid.layout import (
    GenLayout,
    TrainLayout,
    generation_pp_groups,
    generation_tp_groups,
    micro_dp_groups,
)


@attrs.frozen
class HybridGroups:
    """This rank's micro-DP, generation tensor-parallel and generation pipeline groups.

    A group of one rank is ``None`` (nothing to communicate).
    """

    micro_dp: Any
    gen_tp: Any
    gen_pp: Any


def _mine(all_groups: list[tuple[int, ...]], rank: int, backend: str | None) -> Any:
    import torch.distributed as dist

    mine = None
    for members in all_groups:
        group = dist.new_group(list(members), backend=backend)
        if rank in members and len(members) > 1:
            mine = group
    return mine


def create_groups(train: TrainLayout, gen: GenLayout, backend: str | None = None) -> HybridGroups:
    """Create every micro-DP / generation group of the world (call on all ranks alike)."""
    import torch.distributed as dist

    rank = dist.get_rank()
    return HybridGroups(
        micro_dp=_mine(micro_dp_groups(train, gen), rank, backend),
        gen_tp=_mine(generation_tp_groups(train, gen), rank, backend),
        gen_pp=_mine(generation_pp_groups(train, gen), rank, backend),
    )
