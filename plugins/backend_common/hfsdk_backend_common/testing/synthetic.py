"""Synthetic Llama-shaped weights and shards, for checks and benchmarks without a model.

Every full weight is drawn from its own generator seeded by the weight's
name, so any rank can rebuild any weight (or just the slice it needs)
without holding the whole model.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hfsdk_backend_common.hybrid.llama_format import ParamSpec, tp_slice

if TYPE_CHECKING:
    import torch


def full_weight(spec: ParamSpec, seed: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The full weight ``spec`` of the synthetic model ``seed`` (deterministic)."""
    import torch

    generator = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(spec.name.encode()))
    weight = torch.randn(spec.shape, generator=generator)
    return weight.to(dtype) if dtype is not None else weight


def synthetic_shard(
    specs: Sequence[ParamSpec],
    *,
    p: int,
    t: int,
    stage: int,
    tp: int,
    num_layers: int,
    seed: int,
    dtype: torch.dtype | None = None,
) -> dict[str, torch.Tensor]:
    """Rank (``stage``, ``tp``)'s slices of the synthetic model, one full weight at a time."""
    shard = {}
    for spec in specs:
        if spec.stage(p, num_layers) == stage:
            shard[spec.name] = tp_slice(full_weight(spec, seed, dtype), spec, t, tp)
    return shard
