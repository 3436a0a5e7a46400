"""Per-device memory of a role under a layout, and a group's device minimum.

Assumptions (bf16 weights, mixed-precision Adam, Megatron-style layouts):

* training state: bf16 parameters and gradients split over the model-parallel
  devices (p * t); fp32 master weights and both Adam moments (12 bytes per
  parameter) also split over data parallelism (a distributed optimizer);
* activations: with full recomputation (``workload.recompute``, gradient
  checkpointing) a device keeps one layer input per layer per in-flight
  micro-batch, one layer's working set and the fp32 logits of a micro-batch;
  without it every layer's working set; all divided by t. Packing
  (``workload.packing``) sizes them by the mean sequence length instead of
  the padded one;
* LoRA (``workload.lora_rank``, the policy only): the frozen base is held as
  fp32 master weights (4 bytes per parameter, what a sharded data-parallel backend keeps)
  without gradients or optimizer state; the adapters (:func:`lora_params`)
  carry the 16 bytes per parameter of a trained weight; generating needs a
  merged copy of the weights in the compute dtype;
* inference: bf16 parameters split over p * t, plus a forward working set of one
  forward micro-batch (``forward_micro_batch_size``; a trained role's own inference
  pass counts too);
* generation: the HybridEngine keeps the training shard and gathers the rest
  of its rollout shard (2 * P / tg bytes), plus the KV cache of the sequences
  a replica decodes at once (its running batch), at full length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs

from hfsdk_planner.layout import MIN_RUNNING, GenerationLayout, Layout
from hfsdk_planner.model_spec import ModelSpec
from hfsdk_planner.workload import RoleTask, Workload

WEIGHT_BYTES = 2
"""bf16 parameters (and gradients)."""
OPTIMIZER_BYTES = 12
"""fp32 master weights plus Adam's two moments, per parameter."""
LAYER_WORKING_FACTOR = 34
"""Bytes per token per hidden unit a transformer layer's activations take in bf16."""
FROZEN_BASE_BYTES = 4
"""A LoRA policy's frozen base: fp32 master weights, no gradient, no optimizer state."""


def lora_params(model: ModelSpec, rank: int) -> int:
    """Adapter parameters of rank ``rank`` on every linear layer of every block.

    A linear ``in -> out`` gets ``rank · (in + out)``; a Llama/Qwen block has
    q, o (h -> h), k, v (h -> kv width), gate, up (h -> ffn) and down (ffn -> h).
    """
    h, ffn = model.hidden_size, model.intermediate_size
    kv = model.num_kv_heads * model.head_dim
    per_layer = 2 * (h + h) + 2 * (h + kv) + 2 * (h + ffn) + (ffn + h)
    return rank * per_layer * model.num_layers


def is_lora_policy(task: RoleTask) -> bool:
    """Whether ``task`` is the policy (it generates and trains) with LoRA adapters."""
    return task.workload.lora_rank > 0 and task.trains and task.generates


@attrs.frozen
class RoleMemory:
    """A role's per-device bytes: ``resident`` (always held) and ``transient`` (peak extra)."""

    resident: float
    transient: float

    @property
    def peak(self) -> float:
        """The most the role holds at once."""
        return self.resident + self.transient


def weight_bytes(model: ModelSpec, model_parallel: int) -> float:
    """bf16 weights per device when one replica is split over ``model_parallel`` devices."""
    return WEIGHT_BYTES * model.num_params / model_parallel


def training_state_bytes(model: ModelSpec, layout: Layout, lora_rank: int = 0) -> float:
    """Parameters, gradients and (data-parallel-sharded) optimizer state per device.

    With ``lora_rank`` only the adapters have gradients and optimizer state; the
    base is frozen fp32 (:data:`FROZEN_BASE_BYTES`).
    """
    mp = layout.model_parallel
    if lora_rank:
        adapters = lora_params(model, lora_rank)
        frozen = FROZEN_BASE_BYTES * model.num_params / mp
        return (
            frozen + 2 * WEIGHT_BYTES * adapters / mp + OPTIMIZER_BYTES * adapters / (mp * layout.d)
        )
    return 2 * WEIGHT_BYTES * model.num_params / mp + OPTIMIZER_BYTES * model.num_params / (
        mp * layout.d
    )


def _micro_batch_tokens(workload: Workload, *, forward: bool = False) -> int:
    """Tokens a micro-batch's activations cover: padded, or the mean length when packed.

    ``forward``: an inference pass's micro-batch (``forward_micro_batch``), which a run
    often sets far larger than the training one.
    """
    length = workload.sequence_length
    if workload.packing and workload.mean_sequence_length:
        length = min(length, workload.mean_sequence_length)
    rows = workload.forward_micro_batch if forward else workload.micro_batch_size
    return rows * length


def training_activation_bytes(model: ModelSpec, layout: Layout, workload: Workload) -> float:
    """Peak activation bytes per device while training (1F1B).

    With recomputation the first pipeline stage holds p micro-batches of L/p
    layer inputs, i.e. L layer inputs of one micro-batch, independent of p,
    plus one layer's working set; without it every layer's working set.
    """
    tokens = _micro_batch_tokens(workload)
    width = workload.dtype_bytes / WEIGHT_BYTES  # the factors are bf16's; fp32 doubles them
    layer = tokens * model.hidden_size * LAYER_WORKING_FACTOR * width
    if workload.recompute:
        stored = tokens * model.hidden_size * workload.dtype_bytes * model.num_layers
        working = layer
    else:
        stored, working = layer * model.num_layers, 0
    logits = tokens * model.vocab_size * 4
    return (stored + working + logits) / layout.t


def inference_activation_bytes(model: ModelSpec, layout: Layout, workload: Workload) -> float:
    """Peak activation bytes per device in a forward pass (nothing stored for backward),
    one forward micro-batch (``workload.forward_micro_batch``) at a time."""
    tokens = _micro_batch_tokens(workload, forward=True)
    width = workload.dtype_bytes / WEIGHT_BYTES
    working = tokens * model.hidden_size * LAYER_WORKING_FACTOR * width
    return (working + tokens * model.vocab_size * 4) / layout.t


def kv_cache_bytes(
    model: ModelSpec, sequences: int, tokens_per_sequence: int, dtype_bytes: int = 2
) -> float:
    """KV cache of ``sequences`` sequences of ``tokens_per_sequence`` tokens, all layers,
    ``dtype_bytes`` per element (the generation module allocates it in the weights' dtype)."""
    return float(sequences * tokens_per_sequence * model.kv_bytes_per_token(dtype_bytes))


def generation_bytes(
    model: ModelSpec,
    layout: Layout,
    gen: GenerationLayout,
    workload: Workload,
    merged_copy: bool = False,
) -> float:
    """Extra bytes per device while generating: gathered weights plus the KV cache.

    ``merged_copy`` (a LoRA policy): the rollout gets base + adapters merged
    into weights of its own (the compute dtype) instead of the training shards.
    """
    gathered = max(0.0, weight_bytes(model, gen.tg) - weight_bytes(model, layout.model_parallel))
    if merged_copy:
        gathered = workload.dtype_bytes * model.num_params / gen.tg
    # KV heads are split over tg; beyond their number they are replicated.
    kv_split = min(gen.tg, model.num_kv_heads)
    kv = kv_cache_bytes(model, gen.running, workload.sequence_length, workload.dtype_bytes)
    kv /= kv_split
    return gathered + kv


def role_memory(task: RoleTask, layout: Layout, gen: GenerationLayout | None) -> RoleMemory:
    """Per-device memory of ``task`` with training/inference ``layout`` and rollout ``gen``."""
    model, workload = task.model, task.workload
    lora = is_lora_policy(task)
    if task.trains:
        resident = training_state_bytes(model, layout, workload.lora_rank if lora else 0)
        transient = training_activation_bytes(model, layout, workload)
        if any(kind == "inference" for _stage, kind in task.work):
            # Its own forward pass (old log-probs) runs at the forward micro-batch size.
            transient = max(transient, inference_activation_bytes(model, layout, workload))
    else:
        # Frozen weights are held in the compute dtype (bf16: the weight_bytes default).
        resident = workload.dtype_bytes * model.num_params / layout.model_parallel
        transient = inference_activation_bytes(model, layout, workload)
    if gen is not None:
        generating = generation_bytes(model, layout, gen, workload, merged_copy=lora)
        transient = max(transient, generating)
    return RoleMemory(resident=resident, transient=transient)


def sharded_footprint_bytes(task: RoleTask) -> float:
    """Bytes the role needs in total across its devices when split as finely as possible.

    Training state (or weights), plus for a generating role the KV cache of
    the smallest running batch the simulator tries; used for the lower bound
    on a group's device count.
    """
    params = task.model.num_params
    total = (2 * WEIGHT_BYTES + OPTIMIZER_BYTES) * params if task.trains else WEIGHT_BYTES * params
    if is_lora_policy(task):
        total = training_state_bytes(task.model, Layout(1, 1, 1), task.workload.lora_rank)
    if task.generates:
        workload = task.workload
        smallest = min(workload.sequences, workload.max_running_sequences, MIN_RUNNING)
        total += kv_cache_bytes(
            task.model, smallest, workload.sequence_length, workload.dtype_bytes
        )
    return total


def min_group_devices(tasks: Iterable[RoleTask], usable_bytes_per_device: float) -> int:
    """Fewest devices that could hold every role of a colocated group (a lower bound).

    Colocated roles keep their state on the same devices at once, so their
    footprints add up.
    """
    total = sum(sharded_footprint_bytes(task) for task in tasks)
    return max(1, math.ceil(total / usable_bytes_per_device))
