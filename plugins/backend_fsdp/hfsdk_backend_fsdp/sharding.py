"""FSDP2 for HF models: sharding, gathering for generation, full state dicts.

Every function also works without torch.distributed (a single process) and
in a group of one rank: the model then stays a plain module (FSDP over one
rank would only copy each unit in and out for every pass) and state dicts are
its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk import DataParallelInfo

if TYPE_CHECKING:
    import torch
    from torch import nn
    from torch.distributed import ProcessGroup


@attrs.frozen(kw_only=True)
class DataParallel(DataParallelInfo):
    """The data-parallel process group of an engine (``group`` is ``None`` in one process).

    What a rollout sees of it (``hfsdk.DataParallelInfo``): every fsdp rank collects.
    """

    @property
    def distributed(self) -> bool:
        """Whether a torch.distributed group is in use (even of size 1)."""
        return self.group is not None


def data_parallel(group: ProcessGroup | None = None) -> DataParallel:
    """The group to shard over: ``group``, the default group, or none without torch.distributed."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        if group is not None:
            raise RuntimeError(
                "a process group was given but torch.distributed is not initialised; call "
                "torch.distributed.init_process_group first"
            )
        return DataParallel()
    group = group or dist.group.WORLD
    return DataParallel(
        group=group, size=dist.get_world_size(group), rank=dist.get_rank(group), actor_group=group
    )


def _layer_classes(model: nn.Module) -> set[str]:
    """Class names of the repeated blocks to shard one by one (HF's ``_no_split_modules``)."""
    names = getattr(model, "_no_split_modules", None) or []
    return set(names)


def shard_model(
    model: nn.Module,
    dp: DataParallel,
    device_type: str,
    *,
    compute_dtype: torch.dtype | None = None,
    reshard_after_forward: bool = True,
    offload: bool = False,
) -> nn.Module:
    """Apply FSDP2 ``fully_shard`` to each transformer block, then to the whole model.

    Blocks are found through HF's ``_no_split_modules``; embeddings, the final
    norm and the heads belong to the root group. ``compute_dtype`` (e.g.
    bfloat16) is the forward/backward dtype while the sharded master weights
    keep their own dtype and gradients are reduced in float32. A group of one
    rank (or none) leaves the model a plain module; the engine then computes
    in ``compute_dtype`` under autocast. ``offload`` (GPU only, see
    :func:`offload_enabled`) keeps the shards, their gradients and the optimizer
    step in host memory (FSDP2's ``CPUOffloadPolicy``); it shards even a group of
    one rank, since the offload lives in FSDP.
    """
    import torch
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    if not dp.distributed or (dp.size == 1 and not offload):
        if offload:
            import logging

            logging.getLogger("hfsdk").info(
                "offload needs a torch.distributed group (every worker has one); this engine "
                "has none, so its model stays on the device"
            )
        return model
    mesh = DeviceMesh.from_group(dp.group, device_type)
    mp_policy = MixedPrecisionPolicy(
        param_dtype=compute_dtype, reduce_dtype=torch.float32 if compute_dtype else None
    )
    extra: dict[str, Any] = {"offload_policy": CPUOffloadPolicy()} if offload else {}
    blocks = _layer_classes(model)
    for module in list(model.modules()):
        if type(module).__name__ in blocks:
            fully_shard(
                module,
                mesh=mesh,
                reshard_after_forward=reshard_after_forward,
                mp_policy=mp_policy,
                **extra,
            )
    fully_shard(
        model, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=mp_policy, **extra
    )
    return model


def offload_enabled(requested: bool, device_type: str, role: str) -> bool:
    """Whether CPU offload applies: asked for and computing on a GPU.

    On a CPU-only machine parameters and optimizer state already live in host
    memory, so ``offload: true`` is a no-op there (one info line, not an error).
    """
    if not requested:
        return False
    if device_type == "cpu":
        import logging

        logging.getLogger("hfsdk").info(
            "%s.offload: the role computes on the CPU, where parameters and optimizer state "
            "already live in host memory; nothing to offload",
            role,
        )
        return False
    return True


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` is under FSDP2."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@contextlib.contextmanager
def gathered(model: nn.Module, *, reshard_after_forward: bool = True) -> Iterator[nn.Module]:
    """Hold the full weights on every rank for a while (e.g. one ``generate`` call).

    Under FSDP2 every sharded module is unsharded once and kept so through
    any number of forwards — no collective per token, so ranks may decode a
    different number of steps — and resharded on exit. The gathered weights
    replace the shards' views only temporarily: no second model is kept.
    ``reshard_after_forward`` is the setting to restore on exit (the one the
    model was sharded with).
    """
    from torch.distributed.fsdp import FSDPModule

    modules = [m for m in model.modules() if isinstance(m, FSDPModule)]
    for module in modules:
        module.unshard()
        module.set_reshard_after_forward(False, recurse=False)
    try:
        yield model
    finally:
        for module in modules:
            module.reshard()
            module.set_reshard_after_forward(reshard_after_forward, recurse=False)


def shard_bit_sums(model: nn.Module, param_dtype: torch.dtype | None) -> dict[str, int]:
    """Name → bit sum (:func:`hfsdk_backend_common.bit_sum`) of this rank's part of every
    parameter, as it will be gathered.

    A sharded parameter's local shard (``to_local()``: FSDP2's padding is not in it) is cast
    to ``param_dtype`` first (the mixed-precision dtype FSDP gathers in; ``None``: its own),
    so the sums over the ranks add up to the gathered parameter's. A parameter that is not
    sharded counts on rank 0 only (every rank holds all of it).
    """
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from hfsdk_backend_common import bit_sum

    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    sums = {}
    for name, param in model.named_parameters():
        if isinstance(param, DTensor):
            local = param.to_local().detach()
            sums[name] = bit_sum(local.to(param_dtype) if param_dtype is not None else local)
        else:
            sums[name] = bit_sum(param.detach()) if rank == 0 else 0
    return sums


def check_gathered(
    model: nn.Module,
    shard_sums: dict[str, int],
    dp: DataParallel,
    device: torch.device,
    *,
    corrupt: str | None = None,
) -> str | None:
    """Whether the full parameters ``model`` holds (inside :func:`gathered`) are what its shards
    held: ``None``, else one line naming the first that is not. Collective over ``dp``.

    ``shard_sums`` (:func:`shard_bit_sums`, taken before the gather) are summed over the
    ranks; each rank compares them with the bit sums of the full parameters it holds, and the
    ranks agree on the verdict (a parameter wrong on any rank is wrong on all), so every rank
    raises or none does. ``corrupt`` (fault injection, ``gather_drop``): on the last rank,
    change one element of that gathered parameter first.
    """
    import torch
    import torch.distributed as dist

    from hfsdk_backend_common import bit_sum

    names = list(shard_sums)
    held = dict(model.named_parameters())
    missing = [name for name in names if name not in held]
    if missing:
        return f"{len(missing)} parameter(s) not in the gathered module (first: {missing[0]!r})"
    if corrupt is not None and dp.rank == dp.size - 1:
        flat = held[corrupt].data.view(-1)
        as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        flat.view(as_int[flat.element_size()])[0] ^= 1  # one bit of one element flipped
    expected = torch.tensor([shard_sums[n] for n in names], dtype=torch.int64, device=device)
    full = torch.tensor([bit_sum(held[n]) for n in names], dtype=torch.int64, device=device)
    if dp.group is not None:
        dist.all_reduce(expected, op=dist.ReduceOp.SUM, group=dp.group)
    wrong = (full != expected).to(torch.int64)
    if dp.group is not None:
        dist.all_reduce(wrong, op=dist.ReduceOp.MAX, group=dp.group)
    bad = [name for name, flag in zip(names, wrong.tolist(), strict=True) if flag]
    if not bad:
        return None
    return (
        f"{len(bad)} of {len(names)} gathered parameter(s) differ from the sum of their shards "
        f"(first: {bad[0]!r})"
    )


def fsdp_units(model: nn.Module) -> list[nn.Module]:
    """The FSDP2-managed modules of ``model``: blocks in order, the root last."""
    from torch.distributed.fsdp import FSDPModule

    units = [m for m in model.modules() if isinstance(m, FSDPModule)]
    # model.modules() yields the root first; generation order wants it last.
    return units[1:] + units[:1] if units and units[0] is model else units


def _own_parameters(model: nn.Module, unit: nn.Module, units: list[nn.Module]) -> list[str]:
    """Full names of the parameters ``unit`` itself shards (not those of nested units)."""
    prefix = next(name for name, m in model.named_modules() if m is unit)
    nested = {
        name for name, m in unit.named_modules() if name and any(m is other for other in units)
    }
    own = []
    for name, _ in unit.named_parameters():
        if any(name == n or name.startswith(n + ".") for n in nested):
            continue
        own.append(f"{prefix}.{name}" if prefix else name)
    return own


def unsharded_units(model: nn.Module) -> int:
    """How many FSDP units hold full (unsharded) weights right now."""
    from torch.distributed.tensor import DTensor

    units = fsdp_units(model)
    count = 0
    for unit in units:
        params = [_full_tensor(model, name) for name in _own_parameters(model, unit, units)]
        if params and not any(isinstance(p, DTensor) for p in params):
            count += 1
    return count


@attrs.define
class StreamStats:
    """What streaming the weights cost: unit sizes, and the most held at once."""

    units: int = 0
    full_bytes: int = 0
    peak_unit_bytes: int = 0
    received_bytes: int = 0
    max_unsharded_units: int = 0


def stream_full_parameters(
    model: nn.Module,
    dp: DataParallel,
    stats: StreamStats | None = None,
    *,
    check_one_unit: bool = False,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, full weight)`` one FSDP unit (transformer block) at a time.

    Each unit is unsharded (all-gathered over the data-parallel group), its
    weights are yielded, and it is resharded before the next unit: a consumer
    that copies each weight into its generation engine needs about one block
    of extra memory, not a second model. A yielded tensor is valid only until
    the generator advances. Without FSDP the module's own weights are yielded.
    ``check_one_unit`` counts the units unsharded at each step (a test aid).
    """
    if not is_sharded(model):
        yield from model.named_parameters()
        return
    units = fsdp_units(model)
    for unit in units:
        names = _own_parameters(model, unit, units)
        unit.unshard()
        try:
            full = {name: _full_tensor(model, name) for name in names}
            if stats is not None:
                nbytes = sum(t.numel() * t.element_size() for t in full.values())
                stats.units += 1
                stats.full_bytes += nbytes
                stats.peak_unit_bytes = max(stats.peak_unit_bytes, nbytes)
                stats.received_bytes += nbytes * (dp.size - 1) // dp.size
                if check_one_unit:
                    stats.max_unsharded_units = max(
                        stats.max_unsharded_units, unsharded_units(model)
                    )
            yield from full.items()
        finally:
            unit.reshard()


def _full_tensor(model: nn.Module, name: str) -> torch.Tensor:
    """The currently registered (unsharded) tensor of parameter ``name``."""
    module_name, _, attr = name.rpartition(".")
    module = model.get_submodule(module_name) if module_name else model
    return getattr(module, attr)


def full_model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The full (unsharded) model state dict on CPU, on rank 0 only (``{}`` elsewhere)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )


def load_full_model_state(
    model: nn.Module, state: dict[str, torch.Tensor], dp: DataParallel
) -> None:
    """Load a full state dict (rank 0's copy is broadcast to the other ranks)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=dp.distributed)
    set_model_state_dict(
        model, state if (dp.rank == 0 or not dp.distributed) else {}, options=options
    )


def broadcast_buffers(model: nn.Module, dp: DataParallel) -> None:
    """Rank 0's buffers to every rank (those state dicts leave out, e.g. rotary frequencies)."""
    import torch.distributed as dist

    if not dp.distributed:
        return
    source = dist.get_global_rank(dp.group, 0)
    for _name, buffer in model.named_buffers():
        dist.broadcast(buffer, src=source, group=dp.group)


@contextlib.contextmanager
def unstepped_kept(optimizer: torch.optim.Optimizer) -> Iterator[bool]:
    """Whether ``optimizer`` has taken no step yet; if so it is left so after the block.

    torch's optimizer state-dict functions give an empty optimizer its state by a step at
    lr 0, and AdamW counts it: the first real step would be its second (0.74 lr, not lr).
    """
    unstepped = not optimizer.state
    try:
        yield unstepped
    finally:
        if unstepped:
            optimizer.state.clear()


def full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer state keyed by parameter names, unsharded, on rank 0 only."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(
        model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )


def load_full_optimizer_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any], dp: DataParallel
) -> None:
    """Load :func:`full_optimizer_state`'s output (broadcast from rank 0)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=dp.distributed)
    set_optimizer_state_dict(
        model, optimizer, state if (dp.rank == 0 or not dp.distributed) else {}, options=options
    )


def total_grad_norm(model: nn.Module, max_norm: float) -> float:
    """Clip gradients to ``max_norm`` (global over ranks) and return the norm before clipping."""
    import torch

    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if hasattr(norm, "full_tensor"):
        norm = norm.full_tensor()
    return float(norm)
