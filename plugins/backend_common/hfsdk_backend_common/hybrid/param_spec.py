"""How each parameter of a sharded decoder is split over tensor-parallel ranks.

A :class:`ParamSpec` says how a full weight is split over tensor-parallel ranks
(``split``: the dimension, or ``None`` when every tensor rank holds it whole)
and, for fused weights, which parts are stacked along that dimension
(``parts``): a rank's slice of a fused weight is its slice of each part, in
order. That is why re-splitting for another tensor-parallel size is not a plain
concatenation: with ``t=2 -> tg=1`` the fused gate/up weight is
``[gate_0; gate_1; up_0; up_1]``, not ``[gate_0; up_0; gate_1; up_1]``.

This is layout maths (the planner and the byte accounting use it); which
weights a model has, and their names, is model-format code that lives with
the backends (the shared backend package's ``hybrid.llama_format``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import torch


@attrs.frozen(kw_only=True)
class ParamSpec:
    """One full weight: its shape, tensor-parallel split, fused parts and owner.

    ``layer`` is the decoder layer index, or ``None`` for the embedding
    (``place='first'``: the first pipeline stage) and the final norm and
    output layer (``place='last'``).
    """

    name: str
    shape: tuple[int, ...]
    split: int | None = None
    parts: tuple[int, ...] = ()
    layer: int | None = None
    place: str = "layer"

    @property
    def part_sizes(self) -> tuple[int, ...]:
        """Sizes of the fused parts along ``split`` (one part when not fused)."""
        if self.split is None:
            return ()
        return self.parts or (self.shape[self.split],)

    @property
    def numel(self) -> int:
        """Elements of the full weight."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    def stage(self, p: int, num_layers: int) -> int:
        """The training pipeline stage (of ``p``) that holds this weight."""
        if self.layer is not None:
            return self.layer // (num_layers // p)
        return 0 if self.place == "first" else p - 1

    def shard_shape(self, size: int) -> tuple[int, ...]:
        """Shape of one tensor rank's slice when split over ``size`` ranks."""
        if self.split is None:
            return self.shape
        shape = list(self.shape)
        shape[self.split] //= size
        return tuple(shape)

    def shard_numel(self, size: int) -> int:
        """Elements of one tensor rank's slice when split over ``size`` ranks."""
        return self.numel // size if self.split is not None else self.numel


def tp_slice(full: torch.Tensor, spec: ParamSpec, size: int, index: int) -> torch.Tensor:
    """Tensor rank ``index``'s slice (of ``size``) of the full weight (a new contiguous tensor)."""
    import torch

    if spec.split is None:
        return full.clone()
    pieces = []
    for part in torch.split(full, list(spec.part_sizes), dim=spec.split):
        pieces.append(part.chunk(size, dim=spec.split)[index])
    return torch.cat(pieces, dim=spec.split).contiguous()


def training_shard(
    full: dict[str, torch.Tensor],
    specs: Sequence[ParamSpec],
    *,
    p: int,
    t: int,
    stage: int,
    tp: int,
    num_layers: int,
) -> dict[str, torch.Tensor]:
    """The slices of ``full`` that training rank (``stage``, ``tp``) holds."""
    return {
        s.name: tp_slice(full[s.name], s, t, tp) for s in specs if s.stage(p, num_layers) == stage
    }
