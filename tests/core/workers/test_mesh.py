"""MeshPosition: coordinates from a global rank, the collect rule, validation."""

from __future__ import annotations

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.mesh import MeshPosition


def test_from_rank_varies_tp_fastest_then_dp_then_pp() -> None:
    coords = [
        (p.pp_rank, p.dp_rank, p.tp_rank)
        for p in (MeshPosition.from_rank(r, pp=2, tp=2, dp=3) for r in range(12))
    ]
    expected = [(pp, dp, tp) for pp in range(2) for dp in range(3) for tp in range(2)]
    assert coords == expected


def test_collects_is_tp_zero_of_last_stage_unless_overridden() -> None:
    collecting = [r for r in range(8) if MeshPosition.from_rank(r, pp=2, tp=2, dp=2).collects]
    # Last stage is ranks 4..7; tp rank 0 there is 4 and 6.
    assert collecting == [4, 6]
    forced = MeshPosition(dp_rank=0, dp_size=1, tp_rank=1, tp_size=2, collect=True)
    assert forced.collects


def test_positions_outside_the_mesh_are_rejected() -> None:
    with pytest.raises(HfsdkError, match="tp_rank=2 but tp_size=2"):
        MeshPosition(dp_rank=0, dp_size=1, tp_rank=2, tp_size=2)
    with pytest.raises(HfsdkError, match="outside a pp=1 x tp=2 x dp=2 mesh"):
        MeshPosition.from_rank(4, tp=2, dp=2)
