"""Which rows and columns of each HF Llama weight a generation tensor-parallel rank needs.

The fsdp actor generates at tensor-parallel size ``tg`` (``actor.rollout_layout.tp``)
with megatron's split (``TPDecoder``): q/k/v, gate and up are
column parallel (rank ``j`` needs rows block ``j`` of ``tg`` of each: its
query heads, its key/value heads — so whole key/value groups —, its FFN rows),
o_proj and down_proj are row parallel (columns block ``j``), the embedding
and the output layer vocabulary parallel (rows block ``j`` of the vocabulary
padded to a multiple of ``tg``), the norms replicated.

FSDP2 holds every parameter as a dim-0 chunk per data-parallel rank
(``torch.chunk`` over the ``N`` ranks). A rank therefore needs, from each
source rank, the intersection of the source's rows with its own region — and
nothing else. This module computes those regions and, in closed form, the
bytes each rank receives (:func:`expected_received_bytes`), against which the
exchange's own count is tested. No torch import: the config check runs
before Ray.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

# The decoder's model checks live with the decoder; the fsdp config checks reach them here.
from hfsdk_backend_common.hybrid.support import (  # noqa: F401
    decoder_problems,
    tp_support_problems,
)

_COLUMN_PARALLEL = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
_ROW_PARALLEL = ("o_proj", "down_proj")
_VOCAB_PARALLEL = ("model.embed_tokens.weight", "lm_head.weight")


@attrs.frozen
class Region:
    """The part of a full weight one rank needs: ``[lo, hi)`` along ``dim`` (None: all of it).

    ``rows`` is the number of rows the rank's tensor has (larger than the
    real rows for the padded vocabulary of the last rank).
    """

    dim: int | None
    lo: int = 0
    hi: int = 0
    rows: int = 0


def split_dim(name: str) -> int | None:
    """0 (column/vocab parallel), 1 (row parallel) or None (replicated) for an HF Llama weight."""
    if name in _VOCAB_PARALLEL:
        return 0
    module = name.rsplit(".", 2)[-2] if name.count(".") >= 2 else ""
    if module in _COLUMN_PARALLEL:
        return 0
    if module in _ROW_PARALLEL:
        return 1
    return None


def padded_rows(rows: int, tg: int) -> int:
    """Rows of a vocabulary-parallel weight after padding to a multiple of ``tg``."""
    return -(-rows // tg) * tg


def region(name: str, shape: tuple[int, ...], tg: int, tp_rank: int) -> Region:
    """What tensor rank ``tp_rank`` of ``tg`` needs of weight ``name`` (full ``shape``)."""
    dim = split_dim(name)
    if dim is None:
        return Region(None, 0, shape[0], shape[0])
    size = padded_rows(shape[0], tg) if name in _VOCAB_PARALLEL else shape[dim]
    block = size // tg
    lo = tp_rank * block
    hi = min(lo + block, shape[dim])
    return Region(dim, lo, max(hi, lo), block if dim == 0 else shape[0])


def tp_index(rank: int, world: int, tg: int) -> int:
    """The generation tensor rank of data-parallel ``rank``: ``rank // (world / tg)``.

    Ranks are grouped the HybridFlow way, so that each rank's training shard
    lies inside its generation slice: FSDP gives rank ``r`` rows block ``r``
    of ``world``, which falls inside rows block ``r // (world/tg)`` of ``tg`` —
    exactly the slice tensor rank ``r // (world/tg)`` needs of every
    column-parallel weight. A rank then receives its slice minus its shard.
    """
    return rank // (world // tg)


def replica_ranks(replica: int, world: int, tg: int) -> list[int]:
    """The data-parallel ranks of generation replica ``replica`` in tensor-rank order.

    Stride ``world/tg``: replica ``m`` is ranks ``m, m + world/tg, …`` (see :func:`tp_index`).
    """
    stride = world // tg
    return [replica + i * stride for i in range(tg)]


def fsdp_rows(rows: int, world: int, rank: int) -> tuple[int, int]:
    """The rows ``[start, stop)`` FSDP2 keeps on ``rank`` (``torch.chunk`` over ``world``)."""
    chunk = -(-rows // world)
    start = min(rank * chunk, rows)
    return start, min(start + chunk, rows)


def piece_shape(
    want: Region, shape: tuple[int, ...], source_rows: tuple[int, int]
) -> tuple[int, ...]:
    """Shape of what a source holding ``source_rows`` sends for ``want`` (rows may be 0)."""
    a, b = source_rows
    if want.dim == 0:
        rows = max(0, min(b, want.hi) - max(a, want.lo))
        return (rows, *shape[1:])
    cols = (want.hi - want.lo,) if want.dim == 1 else tuple(shape[1:])
    return (b - a, *cols)


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def expected_received_bytes(
    shapes: Mapping[str, tuple[int, ...]], world: int, tg: int, rank: int, element_size: int
) -> int:
    """Bytes data-parallel ``rank`` receives from the other ranks to build its generation slice.

    Its tensor rank is :func:`tp_index`. Per weight: the rank's region minus the rows of it the
    rank already holds — for a column/vocab-parallel weight
    ``(|region rows| − |region rows ∩ own rows|)·cols``, for a row-parallel one
    ``(rows − own rows)·cols/tg``, for a norm ``rows − own rows``.
    """
    tp_rank = tp_index(rank, world, tg)
    total = 0
    for name, shape in shapes.items():
        want = region(name, shape, tg, tp_rank)
        everything = _numel(piece_shape(want, shape, (0, shape[0])))
        own = _numel(piece_shape(want, shape, fsdp_rows(shape[0], world, rank)))
        total += (everything - own) * element_size
    return total


def full_gather_bytes(
    shapes: Mapping[str, tuple[int, ...]], world: int, rank: int, element_size: int
) -> int:
    """Bytes ``rank`` receives when every weight is all-gathered whole (FSDP's unshard)."""
    total = 0
    for shape in shapes.values():
        a, b = fsdp_rows(shape[0], world, rank)
        total += (shape[0] - (b - a)) * _numel(shape[1:]) * element_size
    return total


def world_problem(tg: int, world: int) -> str | None:
    """``tg`` must divide the actor's data-parallel ranks (each replica is ``tg`` of them)."""
    if world % tg:
        return (
            f"actor.rollout_layout.tp={tg} does not divide the fsdp actor's {world} ranks; "
            f"choose a divisor of {world} (the ranks form {world}/tp generation replicas)"
        )
    return None


def model_config_dict(model_path: str | None) -> dict[str, Any] | None:
    """An HF model directory's ``config.json`` (the default task's model when ``None``).

    ``None`` when the directory has no readable config (the model loader
    reports that case itself).
    """
    import json
    from pathlib import Path

    if model_path is None:
        from hfsdk import default_model_config

        return default_model_config()  # the task registry's default model, not built
    try:
        return dict(json.loads((Path(model_path) / "config.json").read_text()))
    except (OSError, ValueError):
        return None
