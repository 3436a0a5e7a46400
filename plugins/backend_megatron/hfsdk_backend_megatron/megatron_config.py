"""Configuration of the megatron-core training backend."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk import help_field
from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_common.role_fields import TrainedRoleConfig


@attrs.frozen(kw_only=True)
class ParallelConfig:
    """The model-parallel layout of a role: ``tp`` × ``pp``; dp = devices / (tp · pp).

    ``sequence_parallel`` (megatron-core's activation split along the
    sequence) is reserved: the backend refuses it for now (see docs/backends.md).
    """

    tp: int = help_field(
        "Tensor-parallel ranks per model replica (megatron-core column/row-parallel layers).",
        default=1,
        validator=attrs.validators.ge(1),
    )
    pp: int = help_field(
        "Pipeline stages per model replica.",
        default=1,
        validator=attrs.validators.ge(1),
    )
    sequence_parallel: bool = help_field(
        "megatron-core sequence parallelism (reserved: refused for now).",
        default=False,
    )


@attrs.frozen(kw_only=True)
class MegatronRoleConfig(TrainedRoleConfig):
    """A role (actor, critic, reference, reward, cost) trained or served with megatron-core.

    The shared keys (batch sizes, optimizer, dtype, device) are
    :class:`~hfsdk_backend_common.role_fields.TrainedRoleConfig`'s, so a role
    switches backend by changing ``backend`` and adding ``parallel``.
    ``model_path`` is a local HF Llama / Qwen2 directory (``None``: the
    built-in default task's model); it is converted into this rank's
    tensor/pipeline shard at start.
    """

    backend: str = help_field(
        "Training backend of this role (megatron: megatron-core tensor/pipeline parallel).",
        default="megatron",
    )
    parallel: ParallelConfig = help_field(
        "Model-parallel layout: tp x pp; data parallel = devices / (tp·pp).",
        factory=ParallelConfig,
    )
    rollout_layout: RolloutLayoutConfig = help_field(
        "The actor's generation layout {tp, pp} (default: the training tp, pp 1); the "
        "3D-HybridEngine reshards into it for every rollout (docs/hybrid_engine.md).",
        factory=RolloutLayoutConfig,
    )
    device: Literal["auto", "cpu", "cuda"] = help_field(
        "auto (CUDA when available), cpu or cuda.",
        default="auto",
        validator=attrs.validators.in_(("auto", "cpu", "cuda")),
    )
    gradient_checkpointing: bool = help_field(
        "Recompute activations in backward (less memory, ~30% more compute).",
        default=False,
        # A memory lever, as fsdp's: it changes no checkpoint state, so a resume may turn it on.
        resumable=True,
    )
    """megatron-core's full activation recompute, one transformer layer per checkpoint
    (``recompute_granularity=full``, ``recompute_method=uniform``, ``recompute_num_layers=1``):
    only each layer's input is kept from the forward; the same key as the fsdp backend's."""
    lora: LoraConfig = help_field(
        "LoRA adapters: not supported by the megatron backend (rank must stay 0).",
        factory=LoraConfig,
    )
    """Accepted so a config switches backend without edits; ``rank > 0`` is refused."""
