"""The role-config fields every training backend shares (``actor``, ``critic``, ...).

A backend's role config extends :class:`TrainedRoleConfig` and adds its own
keys (parallel layout, FSDP switches), so the batch, optimizer, dtype and
device keys mean the same for every backend and a role switches backend by
changing ``backend`` and adding that backend's keys.
"""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk import RoleConfig, absolute_if_exists, help_field
from hfsdk_backend_common.optim_config import OptimConfig


@attrs.frozen(kw_only=True)
class TrainedRoleConfig(RoleConfig):
    """A model role's shared keys: model, tokenizer, optimizer, batch sizes, dtype, device.

    ``model_path`` is a local HF model directory; ``None`` uses the built-in
    default task's model. ``tokenizer_path`` defaults to ``model_path``.

    Batch sizes are in samples (responses). ``mini_batch_size`` is global: the
    samples of one optimizer step summed over the data-parallel ranks (it must
    be divisible by their number). ``micro_batch_size`` is per rank: the
    samples of one forward/backward pass (gradients are accumulated over the
    micro-batches of a mini-batch). ``forward_micro_batch_size`` is the same
    for inference (log-probs, values, scores); ``None`` uses ``micro_batch_size``.
    """

    model_path: str | None = help_field(
        "Local HF model directory; null: the built-in default task's model.",
        default=None,
        converter=absolute_if_exists,
    )
    tokenizer_path: str | None = help_field(
        "Tokenizer directory; null: model_path's.",
        default=None,
        converter=absolute_if_exists,
    )
    optim: OptimConfig = help_field(
        "Optimizer and learning-rate schedule of a trained role.",
        factory=OptimConfig,
    )
    mini_batch_size: int = help_field(
        "Samples per optimizer step, summed over data-parallel ranks (must divide by their "
        "number).",
        default=8,
        validator=attrs.validators.ge(1),
    )
    micro_batch_size: int = help_field(
        "Samples per forward/backward pass on one rank (gradients accumulate over a mini-batch).",
        default=4,
        validator=attrs.validators.ge(1),
        resumable=True,
    )
    forward_micro_batch_size: int | None = help_field(
        "Samples per inference pass (log-probs, values, scores); null: micro_batch_size.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
        resumable=True,
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
    """Shuffle samples into mini-batches (each epoch; seeded by ``seed`` and the update count)."""
    seed: int = help_field(
        "Seed of the mini-batch shuffle and of the LoRA adapters' initialisation (lora.rank > 0).",
        default=0,
    )

    def updates_in_one_pass(self, samples: int) -> bool:
        """One epoch (``ppo_epochs: 1``) of one mini-batch holding all ``samples``."""
        return self.ppo_epochs == 1 and self.mini_batch_size >= samples

    dtype: Literal["float32", "bfloat16"] = help_field(
        "Weights and compute dtype: float32 or bfloat16.",
        default="float32",
        validator=attrs.validators.in_(("float32", "bfloat16")),
    )
    """Compute dtype. Trained roles keep float32 master weights."""
    device: Literal["auto", "cpu", "cuda"] = help_field(
        "auto (CUDA when available), cpu or cuda.",
        default="auto",
        validator=attrs.validators.in_(("auto", "cpu", "cuda")),
    )
    """``auto``: CUDA (the rank's local device) when available, else CPU."""
