"""Configuration of the megatron-core training backend."""

from __future__ import annotations

import attrs

from hfsdk import RoleConfig, help_field


@attrs.frozen(kw_only=True)
class MegatronRoleConfig(RoleConfig):
    """A role trained with megatron-core: tensor, pipeline and data parallel sizes."""

    backend: str = help_field(
        "Training backend of this role (megatron: megatron-core tensor/pipeline parallel).",
        default="megatron",
    )
    model_path: str | None = help_field(
        "Local HF model directory; null: the default task's model.",
        default=None,
    )
    tensor_parallel_size: int = help_field(
        "Tensor-parallel ranks per model replica.",
        default=1,
        validator=attrs.validators.ge(1),
    )
    pipeline_parallel_size: int = help_field(
        "Pipeline stages per model replica.",
        default=1,
        validator=attrs.validators.ge(1),
    )
    micro_batch_size: int = help_field(
        "Samples per forward/backward pass on one rank.",
        default=1,
        validator=attrs.validators.ge(1),
    )
    lr: float = help_field(
        "Learning rate.",
        default=1e-5,
        validator=attrs.validators.gt(0.0),
    )
