"""Configuration of the megatron-core training backend."""

from __future__ import annotations

import attrs

from hfsdk import RoleConfig


@attrs.frozen(kw_only=True)
class MegatronRoleConfig(RoleConfig):
    """A role trained with megatron-core: tensor, pipeline and data parallel sizes."""

    backend: str = "megatron"
    model_path: str | None = None
    tensor_parallel_size: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    pipeline_parallel_size: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    micro_batch_size: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    lr: float = attrs.field(default=1e-5, validator=attrs.validators.gt(0.0))
