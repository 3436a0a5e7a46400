"""Configuration of the megatron-core training backend."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk import RoleConfig, RolloutLayoutConfig, help_field
from hfsdk_backend_common.optim_config import OptimConfig


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
class MegatronRoleConfig(RoleConfig):
    """A role (actor, critic, reference, reward, cost) trained or served with megatron-core.

    The batch and optimizer keys mean what they mean for the ``fsdp`` backend
    (``mini_batch_size`` global in samples, ``micro_batch_size`` per rank), so
    a role switches backend by changing ``backend`` and adding ``parallel``.
    ``model_path`` is a local HF Llama / Qwen2 directory (``None``: the
    built-in default task's model); it is converted into this rank's
    tensor/pipeline shard at start.
    """

    backend: str = help_field(
        "Training backend of this role (megatron: megatron-core tensor/pipeline parallel).",
        default="megatron",
    )
    model_path: str | None = help_field(
        "Local HF Llama/Qwen2 model directory, converted to this rank's shard; null: the "
        "default task's model.",
        default=None,
    )
    tokenizer_path: str | None = help_field(
        "Tokenizer directory; null: model_path's.",
        default=None,
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
    optim: OptimConfig = help_field(
        "Optimizer and learning-rate schedule of a trained role (as for fsdp).",
        factory=OptimConfig,
    )
    mini_batch_size: int = help_field(
        "Samples per optimizer step, summed over data-parallel ranks.",
        default=8,
        validator=attrs.validators.ge(1),
    )
    micro_batch_size: int = help_field(
        "Samples per forward/backward pass on one rank.",
        default=4,
        validator=attrs.validators.ge(1),
    )
    forward_micro_batch_size: int | None = help_field(
        "Samples per inference pass; null: micro_batch_size.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
    )
    ppo_epochs: int = help_field(
        "Passes over each step's batch per update (PPO epochs).",
        default=1,
        validator=attrs.validators.ge(1),
    )
    shuffle: bool = help_field(
        "Shuffle samples into mini-batches each epoch.",
        default=False,
    )
    seed: int = help_field(
        "Seed of the mini-batch shuffle.",
        default=0,
    )
    dtype: Literal["float32", "bfloat16"] = help_field(
        "Weights and compute dtype: float32 or bfloat16.",
        default="float32",
        validator=attrs.validators.in_(("float32", "bfloat16")),
    )
    """Parameter dtype of frozen roles; trained roles keep float32 weights."""
    device: Literal["auto", "cpu", "cuda"] = help_field(
        "auto (CUDA when available), cpu or cuda.",
        default="auto",
        validator=attrs.validators.in_(("auto", "cpu", "cuda")),
    )
