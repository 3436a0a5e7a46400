"""Configuration of the megatron-core training backend."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk.core.hybrid_engine.config import RolloutLayoutConfig
from hfsdk.core.role_config import RoleConfig
from hfsdk_backend_fsdp.fsdp_config import OptimConfig


@attrs.frozen(kw_only=True)
class ParallelConfig:
    """The model-parallel layout of a role: ``tp`` × ``pp``; dp = devices / (tp · pp).

    ``sequence_parallel`` (megatron-core's activation split along the
    sequence) is reserved: the backend refuses it for now (see docs/backends.md).
    """

    tp: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    pp: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    sequence_parallel: bool = False


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

    backend: str = "megatron"
    model_path: str | None = None
    tokenizer_path: str | None = None
    parallel: ParallelConfig = attrs.field(factory=ParallelConfig)
    rollout_layout: RolloutLayoutConfig = attrs.field(factory=RolloutLayoutConfig)
    """The actor's generation layout ``{tp, pp}`` (default: the training tp, pp 1); the
    3D-HybridEngine reshards into it for every rollout (docs/hybrid_engine.md)."""
    optim: OptimConfig = attrs.field(factory=OptimConfig)
    mini_batch_size: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    micro_batch_size: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    forward_micro_batch_size: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    ppo_epochs: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    shuffle: bool = False
    seed: int = 0
    dtype: Literal["float32", "bfloat16"] = attrs.field(
        default="float32", validator=attrs.validators.in_(("float32", "bfloat16"))
    )
    """Parameter dtype of frozen roles; trained roles keep float32 weights."""
    device: Literal["auto", "cpu", "cuda"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "cpu", "cuda"))
    )
