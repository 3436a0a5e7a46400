"""Verified reloads of a vLLM engine: what it holds after a reload, read back against what
was streamed into it.

vLLM keeps the weights in its own layout: q/k/v and gate/up projections fused into one
tensor, the vocabulary padded with zero rows, and on CPU every linear weight moved into
the matmul kernel's packed form (the layer's ``weight`` parameter is left empty). So the
check compares, per engine tensor, the exact bit sum (:func:`hfsdk_backend_common.bit_sum`) of
what it holds with the sum of the bit sums of the HF tensors streamed into it (cast to the
engine's dtype first, as the loader does): integer sums, exact and independent of the
order, fusion or padding of the elements. A tensor whose weight lives in a kernel is read
back through that kernel: the layer applied to an identity matrix returns its weight
(each output is one product with 1.0, so nothing is rounded), i.e. what the engine really
generates with. A kernel returns a -0.0 weight as +0.0 and may flush a subnormal one to 0
(vLLM's CPU oneDNN matmul does both; the weight computes the same), so a kernel-held
tensor is compared on values normalized alike on both sides (:func:`normalized_bit_sum`);
every other tensor bit for bit. A tensor-parallel engine (generation tp > 1) holds only
its rank's slices: each rank compares what its engine holds with the slices of the stream
that rank's loaders cut (:func:`rank_slicer`).

The cost per reload is one pass over each streamed tensor (and one compare pass for the
normalized sum) plus, for a kernel-held weight of K inputs, a K×K-by-weight matmul
(measured in docs/reliability.md, before the compare pass was added).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hfsdk_backend_common import bit_sum, compare_manifest

if TYPE_CHECKING:
    from hfsdk_backend_common import ProbeCheck
    from hfsdk_rollout_vllm.engine import ColocatedEngine

_EYE_ROWS = 1024  # identity rows per kernel call: bounds the read-back's temporary output


def _flushed_bits(tensor: torch.Tensor) -> int:
    """The bit sum of ``tensor``'s -0.0 and subnormal (``|x| < finfo.tiny``) elements: what
    reading them as +0.0 (whose bits are 0) takes off its :func:`bit_sum`."""
    if not tensor.is_floating_point():
        return 0
    flat = tensor.detach().reshape(-1)
    return bit_sum(flat[flat.abs() < torch.finfo(flat.dtype).tiny])


def normalized_bit_sum(tensor: torch.Tensor) -> int:
    """:func:`bit_sum` of ``tensor`` with -0.0 and subnormals (``|x| < finfo.tiny``) read as
    +0.0: what a kernel that drops the sign of zero and flushes denormals holds of it.
    Non-float tensors are summed exactly."""
    return bit_sum(tensor) - _flushed_bits(tensor)


class HeldSums(dict):
    """:func:`held_sums`'s answer: engine tensor name → bit sum, and in ``kernel`` the names
    read back through a kernel, whose sums are :func:`normalized_bit_sum`'s."""

    def __init__(self, sums: Mapping[str, int] = (), kernel: Iterable[str] = ()) -> None:
        super().__init__(sums)
        self.kernel = frozenset(kernel)


def _kernel_weight_sum(layer: torch.nn.Module, dtype: torch.dtype) -> int:
    """The normalized bit sum (:func:`normalized_bit_sum`) of a linear layer's weight held by
    its matmul kernel (read through it)."""
    inputs = int(layer.input_size_per_partition)
    total = 0
    for start in range(0, inputs, _EYE_ROWS):
        rows = min(_EYE_ROWS, inputs - start)
        eye = torch.zeros(rows, inputs, dtype=dtype)
        eye[:, start : start + rows] = torch.eye(rows, dtype=dtype)
        total += normalized_bit_sum(layer.quant_method.apply(layer, eye, None))
    return total


def held_sums(model: torch.nn.Module) -> HeldSums:
    """Engine tensor name → bit sum of what ``model`` (vLLM's model) computes with.

    Runs inside vLLM's worker (``LLM.apply_model``). A parameter left empty by the CPU
    kernels' repacking is read back through its layer's kernel, normalized
    (:func:`normalized_bit_sum`) and named in ``kernel``. A parameter shared by
    several layers (a tied LM head holds the input embeddings') is listed once, under its
    first name, as the HF stream names it.
    """
    sums: dict[str, int] = {}
    kernel: list[str] = []
    seen: set[int] = set()
    with torch.no_grad():
        for prefix, layer in model.named_modules():
            for name, param in layer.named_parameters(recurse=False):
                if id(param) in seen:
                    continue
                seen.add(id(param))
                key = f"{prefix}.{name}" if prefix else name
                if param.numel() == 0 and name == "weight" and hasattr(layer, "quant_method"):
                    sums[key] = _kernel_weight_sum(layer, param.dtype)
                    kernel.append(key)
                else:
                    sums[key] = bit_sum(param.data)
    return HeldSums(sums, kernel)


def name_mapping(model: torch.nn.Module) -> Callable[[str], str]:
    """HF weight name → the name of the engine tensor vLLM loads it into.

    Follows the model's ``hf_to_vllm_mapper`` (renamed prefixes) and its
    ``packed_modules_mapping`` (``q_proj`` → ``qkv_proj``, ...), which is how vLLM's
    loaders route a checkpoint tensor.
    """
    mapper = getattr(model, "hf_to_vllm_mapper", None)
    packed = {
        part: fused
        for fused, parts in dict(getattr(model, "packed_modules_mapping", None) or {}).items()
        for part in parts
    }

    def engine_name(name: str) -> str:
        mapped = mapper.map_name(name) if mapper is not None else name
        return ".".join(packed.get(part, part) for part in (mapped or name).split("."))

    return engine_name


def rank_slicer(model: torch.nn.Module) -> Callable[[str, torch.Tensor], torch.Tensor]:
    """(HF name, whole tensor) → the part of it this tensor-parallel rank's engine loads.

    The sent side of a sliced engine's check (generation tp > 1): vLLM's loaders take
    whole tensors and each rank cuts its own slice, so the slice this rank received is
    cut here from the stream by the layer's partition (an identity at tp = 1): column
    parallel layers by output rows (fused q/k/v and gate/up per part, a kv head shared
    by several ranks cut as vLLM does), row parallel ones by input columns (their bias
    is whole on every rank), vocabulary embeddings and heads by their shard's real
    rows (the padding rows hold zeros, which sum to 0). Any other tensor is replicated.
    """
    from vllm.model_executor.layers.linear import (
        ColumnParallelLinear,
        MergedColumnParallelLinear,
        QKVParallelLinear,
        RowParallelLinear,
    )
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    mapper = getattr(model, "hf_to_vllm_mapper", None)
    fused_part = {
        part: (fused, index)
        for fused, parts in dict(getattr(model, "packed_modules_mapping", None) or {}).items()
        for index, part in enumerate(parts)
    }

    def cut(name: str, tensor: torch.Tensor) -> torch.Tensor:
        # The part a fused tensor takes is read off the HF name (the model's mapper may
        # already rename ``q_proj`` to ``qkv_proj``, which loses it).
        index = next((fused_part[p][1] for p in name.split(".") if p in fused_part), None)
        parts = ((mapper.map_name(name) if mapper is not None else name) or name).split(".")
        parts = [fused_part[p][0] if p in fused_part else p for p in parts]
        try:
            layer = model.get_submodule(".".join(parts[:-1]))
        except AttributeError:
            return tensor  # not the engine's: compare_manifest names it as never loaded
        param = parts[-1]
        rank = int(getattr(layer, "tp_rank", 0))
        if isinstance(layer, QKVParallelLinear) and index is not None:
            if index == 0:
                size, shard = layer.num_heads * layer.head_size, rank
            else:
                head = layer.head_size if index == 1 else layer.v_head_size
                size, shard = layer.num_kv_heads * head, rank // layer.num_kv_head_replicas
            return tensor.narrow(0, shard * size, size)
        if isinstance(layer, MergedColumnParallelLinear) and index is not None:
            size = layer.output_sizes[index] // layer.tp_size
            return tensor.narrow(0, rank * size, size)
        if isinstance(layer, ColumnParallelLinear):
            size = layer.output_size_per_partition
            return tensor.narrow(0, rank * size, size)
        if isinstance(layer, RowParallelLinear) and param == "weight":
            size = layer.input_size_per_partition
            return tensor.narrow(1, rank * size, size)
        if isinstance(layer, VocabParallelEmbedding) and param == "weight":
            start, end = (
                layer.shard_indices.org_vocab_start_index,
                layer.shard_indices.org_vocab_end_index,
            )
            return tensor.narrow(0, start, end - start)
        return tensor

    return cut


class RecordedStream:
    """A weight stream on its way into the engine, with the bit sums of what it carried.

    ``dtype``: the engine's dtype (each tensor is summed as the loader stores it).
    ``engine_name``: :func:`name_mapping`'s function. ``cut`` (a tensor-parallel
    engine's rank, :func:`rank_slicer`): each tensor counts by the slice of it this rank
    loads, not whole. ``drop`` (fault injection, ``vllm_drop``) leaves the second tensor
    (with ``cut``: the first one this rank gets a slice of) out of the stream while it
    still counts as sent, as a loader that loses a tensor would. ``merges``: the sender's
    derived weights (a LoRA merge) are checked against its probes as the loader receives
    them, in the engine's dtype (the read-back then shows the engine holds exactly them).
    """

    def __init__(
        self,
        weights: Iterable[tuple[str, torch.Tensor]],
        *,
        dtype: torch.dtype,
        engine_name: Callable[[str], str],
        cut: Callable[[str, torch.Tensor], torch.Tensor] | None = None,
        drop: bool = False,
        merges: ProbeCheck | None = None,
    ) -> None:
        self._weights = weights
        self.merges = merges
        self.cut = cut
        self._dropped = False
        self.dtype = dtype
        self.engine_name = engine_name
        self.drop = drop
        self.sent: dict[str, int] = {}
        self.sent_normalized: dict[str, int] = {}
        """Per engine tensor, :func:`normalized_bit_sum`'s total: what a kernel-held one is
        compared with (the engine's sums do not say which are until they are read back)."""
        self.summing_s = 0.0
        """Seconds spent summing what went by (the sender's share of the check's cost)."""

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        for index, (name, tensor) in enumerate(self._weights):
            started = time.perf_counter()
            key = self.engine_name(name)
            part = tensor if self.cut is None else self.cut(name, tensor)
            cast = part if part.dtype == self.dtype else part.to(self.dtype)
            exact = bit_sum(cast)
            self.sent[key] = self.sent.get(key, 0) + exact
            # The same tensor read as a kernel holds it: one compare pass, no second sum.
            normalized = exact - _flushed_bits(cast)
            self.sent_normalized[key] = self.sent_normalized.get(key, 0) + normalized
            if self.merges is not None:  # the whole tensor, as the loader receives it
                self.merges.observe(name, tensor.to(self.dtype))
            self.summing_s += time.perf_counter() - started
            # A slice that holds data: a rank's empty share of a small dimension (26 vocabulary
            # rows over tp 2 leave one rank none) would lose nothing, and the fault nothing.
            if self.drop and self._drops(index, 0 < part.numel() < tensor.numel()):
                continue
            yield name, tensor

    def _drops(self, index: int, sliced: bool) -> bool:
        """Whether the fault leaves this tensor out: the second one, or with ``cut`` the
        first one this rank holds a non-empty slice of (a lost slice, not a replicated copy)."""
        if self.cut is None:
            return index == 1
        if sliced and not self._dropped:
            self._dropped = True
            return True
        return False

    def problem(self, held: dict[str, Any]) -> str | None:
        """One line on what the engine holds that differs from what was streamed (else None).

        A streamed name the engine has no tensor for shows as never loaded; an engine tensor
        no streamed name maps to as never written: vLLM's reload updates only the tensors it
        is sent, so that one keeps its old weights. (``held`` lists parameters only, a tied
        head once as the embeddings: rotary caches and tied heads are never streamed.) The
        tensors ``held`` names in ``kernel`` (:class:`HeldSums`) are compared on normalized
        sums, the others bit for bit.
        """
        kernel = getattr(held, "kernel", frozenset())
        sent = {k: self.sent_normalized[k] if k in kernel else v for k, v in self.sent.items()}
        problem = compare_manifest(sent, {k: v for k, v in held.items() if k in self.sent})
        unwritten = sorted(set(held) - set(self.sent))
        stale = (
            f"{len(unwritten)} engine tensor(s) the reload never wrote (first: {unwritten[0]!r})"
            if unwritten
            else None
        )
        merged = None if self.merges is None else self.merges.problem()
        return "; ".join(p for p in (problem, stale, merged) if p is not None) or None


def verified_reload(
    engine: ColocatedEngine,
    weights: Iterable[tuple[str, torch.Tensor]],
    *,
    dtype: torch.dtype,
    version: int,
    group: Any = None,
    device: torch.device | str = "cpu",
    verify: bool = True,
    sliced: bool = False,
    drop: bool | None = None,
    probes: Callable[[], Mapping[str, Any]] | None = None,
) -> dict[str, float]:
    """Reload ``engine`` from ``weights`` (HF names, whole tensors), then read it back
    (``verify``; without it only the reload, and no metrics).

    ``sliced``: the engine is one tensor-parallel rank of a vLLM engine (generation
    tp > 1), which holds only its slices: what was sent counts by this rank's slices
    (:func:`rank_slicer`) and is compared with what this rank's engine holds.
    ``version`` is the actor's weights version being loaded (fault injection
    ``vllm_drop:N`` drops a tensor from the reload of version N; ``drop`` overrides
    that decision: the caller took the fault, or not, for this rank; ``vllm_stale:N``: the
    stream is consumed but never reaches the engine, which keeps its old weights).
    ``probes``: the sender's ``weight_probes`` (:class:`hfsdk_backend_common.ProbeCheck`):
    the merged weights it computed are checked against them as they arrive. A reload that fails on
    any rank of ``group`` fails on every rank; so does a verification: every rank raises
    :class:`hfsdk_backend_common.WeightSyncMismatch` (this rank's line, or one naming another
    rank).
    Returns ``sync/verified`` (1.0) and ``timing/vllm_verify_s`` (the summing and the
    read-back: what verifying cost on top of the reload).
    """
    from hfsdk import take_fault
    from hfsdk_backend_common import ProbeCheck, WeightSyncMismatch
    from hfsdk_backend_common.rollout.agreement import on_every_rank
    from hfsdk_rollout_vllm.requests import drain

    if not verify:
        stream = iter(weights)
        on_every_rank(
            lambda: engine.reload_weights(stream),
            what="reloading the vLLM engine's weights",
            group=group,
            drain=lambda: drain(stream),
            device=device,
        )
        return {}
    started = time.perf_counter()
    recorded = RecordedStream(
        weights,
        dtype=dtype,
        engine_name=engine.engine_name(),
        cut=engine.rank_slicer() if sliced else None,
        drop=take_fault("vllm_drop", version) if drop is None else drop,
        merges=None if probes is None else ProbeCheck(probes),
    )
    flowing = iter(recorded)
    # vllm_stale: a reload whose writes miss the weights the engine generates with.
    load = drain if take_fault("vllm_stale", version) else engine.reload_weights
    on_every_rank(
        lambda: load(flowing),
        what="reloading the vLLM engine's weights",
        group=group,
        drain=lambda: drain(flowing),
        device=device,
    )
    reload_s = time.perf_counter() - started
    check_started = time.perf_counter()
    problem = recorded.problem(engine.held_sums())
    check_s = time.perf_counter() - check_started
    failed = problem is not None
    if dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1:
        flag = torch.tensor([1.0 if failed else 0.0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
        if not failed and flag.item() > 0:
            raise WeightSyncMismatch(
                f"the vLLM engine of another actor rank does not hold the actor's weights "
                f"version {version} after reloading them (its log says why); stopping here too"
            )
    if failed:
        raise WeightSyncMismatch(
            f"the vLLM engine does not hold the actor's weights version {version} after "
            f"reloading them: {problem}; it would generate with weights other than the actor's"
        )
    metrics = {
        "sync/verified": 1.0,
        "timing/vllm_verify_s": recorded.summing_s + check_s,
        "timing/vllm_reload_s": reload_s - recorded.summing_s,
    }
    if recorded.merges is not None and recorded.merges.checked:
        metrics["sync/merges_verified"] = float(recorded.merges.checked)
    return metrics
