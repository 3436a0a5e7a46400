"""Per-device memory of a role under a layout, and a group's device minimum.

Assumptions (bf16 weights, mixed-precision Adam, Megatron-style layouts):

* training state: bf16 parameters and gradients split over the model-parallel
  devices (p * t); fp32 master weights and both Adam moments (12 bytes per
  parameter) also split over data parallelism (a distributed optimizer);
* activations: full recomputation with sequence parallelism, so a device keeps
  one layer input per layer per in-flight micro-batch, one layer's working set
  and the fp32 logits of a micro-batch, all divided by t;
* inference: bf16 parameters split over p * t, plus a forward working set;
* generation: the HybridEngine keeps the training shard and gathers the rest
  of its rollout shard (2 * P / tg bytes), plus the KV cache of the sequences
  a replica decodes at once (its running batch), at full length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs

from hfsdk.core.placement.layout import MIN_RUNNING, GenerationLayout, Layout
from hfsdk.core.placement.model_spec import ModelSpec
from hfsdk.core.placement.workload import RoleTask, Workload

WEIGHT_BYTES = 2
"""bf16 parameters (and gradients)."""
OPTIMIZER_BYTES = 12
"""fp32 master weights plus Adam's two moments, per parameter."""
LAYER_WORKING_FACTOR = 34
"""Bytes per token per hidden unit a transformer layer's activations take in bf16."""


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


def training_state_bytes(model: ModelSpec, layout: Layout) -> float:
    """Parameters, gradients and (data-parallel-sharded) optimizer state per device."""
    mp = layout.model_parallel
    return 2 * WEIGHT_BYTES * model.num_params / mp + OPTIMIZER_BYTES * model.num_params / (
        mp * layout.d
    )


def _micro_batch_tokens(workload: Workload) -> int:
    return workload.micro_batch_size * workload.sequence_length


def training_activation_bytes(model: ModelSpec, layout: Layout, workload: Workload) -> float:
    """Peak activation bytes per device while training (1F1B, full recomputation).

    The first pipeline stage holds p micro-batches of L/p layer inputs, i.e.
    L layer inputs of one micro-batch, independent of p.
    """
    tokens = _micro_batch_tokens(workload)
    stored = tokens * model.hidden_size * WEIGHT_BYTES * model.num_layers
    working = tokens * model.hidden_size * LAYER_WORKING_FACTOR
    logits = tokens * model.vocab_size * 4
    return (stored + working + logits) / layout.t


def inference_activation_bytes(model: ModelSpec, layout: Layout, workload: Workload) -> float:
    """Peak activation bytes per device in a forward pass (nothing stored for backward)."""
    tokens = _micro_batch_tokens(workload)
    return (tokens * model.hidden_size * LAYER_WORKING_FACTOR + tokens * model.vocab_size * 4) / (
        layout.t
    )


def kv_cache_bytes(model: ModelSpec, sequences: int, tokens_per_sequence: int) -> float:
    """KV cache of ``sequences`` sequences of ``tokens_per_sequence`` tokens, all layers."""
    return float(sequences * tokens_per_sequence * model.kv_bytes_per_token())


def generation_bytes(
    model: ModelSpec, layout: Layout, gen: GenerationLayout, workload: Workload
) -> float:
    """Extra bytes per device while generating: gathered weights plus the KV cache."""
    gathered = max(0.0, weight_bytes(model, gen.tg) - weight_bytes(model, layout.model_parallel))
    # KV heads are split over tg; beyond their number they are replicated.
    kv_split = min(gen.tg, model.num_kv_heads)
    kv = kv_cache_bytes(model, gen.running, workload.sequence_length) / kv_split
    return gathered + kv


def role_memory(task: RoleTask, layout: Layout, gen: GenerationLayout | None) -> RoleMemory:
    """Per-device memory of ``task`` with training/inference ``layout`` and rollout ``gen``."""
    model, workload = task.model, task.workload
    if task.trains:
        resident = training_state_bytes(model, layout)
        transient = training_activation_bytes(model, layout, workload)
    else:
        resident = weight_bytes(model, layout.model_parallel)
        transient = inference_activation_bytes(model, layout, workload)
    if gen is not None:
        transient = max(transient, generation_bytes(model, layout, gen, workload))
    return RoleMemory(resident=resident, transient=transient)


def sharded_footprint_bytes(task: RoleTask) -> float:
    """Bytes the role needs in total across its devices when split as finely as possible.

    Training state (or weights), plus for a generating role the KV cache of
    the smallest running batch the simulator tries; used for the lower bound
    on a group's device count.
    """
    params = task.model.num_params
    total = (2 * WEIGHT_BYTES + OPTIMIZER_BYTES) * params if task.trains else WEIGHT_BYTES * params
    if task.generates:
        workload = task.workload
        smallest = min(workload.sequences, workload.max_running_sequences, MIN_RUNNING)
        total += kv_cache_bytes(task.model, smallest, workload.sequence_length)
    return total


def min_group_devices(tasks: Iterable[RoleTask], usable_bytes_per_device: float) -> int:
    """Fewest devices that could hold every role of a colocated group (a lower bound).

    Colocated roles keep their state on the same devices at once, so their
    footprints add up.
    """
    total = sum(sharded_footprint_bytes(task) for task in tasks)
    return max(1, math.ceil(total / usable_bytes_per_device))
