"""Configuration of the FSDP2 training backend and the HF-generate rollout backend."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk.core.role_config import RoleConfig, RolloutConfig


@attrs.frozen(kw_only=True)
class OptimConfig:
    """AdamW with linear warmup, then a constant or cosine learning rate."""

    lr: float = attrs.field(default=1e-5, validator=attrs.validators.gt(0.0))
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    warmup_steps: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    lr_schedule: Literal["constant", "cosine"] = attrs.field(
        default="constant", validator=attrs.validators.in_(("constant", "cosine"))
    )
    min_lr_ratio: float = attrs.field(
        default=0.0, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)]
    )
    grad_clip: float = attrs.field(default=1.0, validator=attrs.validators.gt(0.0))


@attrs.frozen(kw_only=True)
class FSDPRoleConfig(RoleConfig):
    """A role (actor, critic, reference, reward, cost) trained or served with FSDP2.

    ``model_path`` is a local HF model directory; ``None`` uses the built-in
    default task's model.
    """

    backend: str = "fsdp"
    model_path: str | None = None
    optim: OptimConfig = attrs.field(factory=OptimConfig)
    mini_batch_size: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    micro_batch_size: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    ppo_epochs: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    dtype: Literal["float32", "bfloat16"] = attrs.field(
        default="float32", validator=attrs.validators.in_(("float32", "bfloat16"))
    )


@attrs.frozen(kw_only=True)
class HFRolloutConfig(RolloutConfig):
    """Batched HF ``generate`` with a KV cache on the actor's own weights."""

    backend: str = "hf"
    max_prompt_length: int = attrs.field(default=64, validator=attrs.validators.ge(1))
    max_response_length: int = attrs.field(default=32, validator=attrs.validators.ge(1))
    temperature: float = attrs.field(default=1.0, validator=attrs.validators.ge(0.0))
    top_p: float = attrs.field(
        default=1.0, validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0)]
    )
    top_k: int = attrs.field(default=0, validator=attrs.validators.ge(0))
