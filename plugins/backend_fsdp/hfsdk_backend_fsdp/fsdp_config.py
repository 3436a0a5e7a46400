"""Configuration of the FSDP2 training backend and the HF-generate rollout backend."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from hfsdk.core.role_config import RoleConfig, RolloutConfig


def _betas(value: object) -> tuple[float, float]:
    """Accept a YAML list for ``betas``."""
    pair = tuple(float(v) for v in value)  # type: ignore[union-attr]
    if len(pair) != 2 or not all(0.0 <= b < 1.0 for b in pair):
        raise ValueError(f"'betas' is {value!r}; expected two numbers in [0, 1), e.g. [0.9, 0.999]")
    return pair  # type: ignore[return-value]


@attrs.frozen(kw_only=True)
class OptimConfig:
    """AdamW with linear warmup, then a constant or cosine learning rate.

    The schedule counts training iterations (one per ``update_actor`` /
    ``update_critic`` call), not optimizer steps. ``cosine`` decays from ``lr``
    to ``lr · min_lr_ratio`` over ``total_steps`` (the trainer fills it from its
    own step count when left at 0).
    """

    lr: float = attrs.field(default=1e-5, validator=attrs.validators.gt(0.0))
    betas: tuple[float, float] = attrs.field(default=(0.9, 0.999), converter=_betas)
    eps: float = attrs.field(default=1e-8, validator=attrs.validators.gt(0.0))
    weight_decay: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    warmup_steps: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    lr_schedule: Literal["constant", "cosine"] = attrs.field(
        default="constant", validator=attrs.validators.in_(("constant", "cosine"))
    )
    min_lr_ratio: float = attrs.field(
        default=0.0, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)]
    )
    total_steps: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    grad_clip: float = attrs.field(default=1.0, validator=attrs.validators.gt(0.0))


@attrs.frozen(kw_only=True)
class FSDPRoleConfig(RoleConfig):
    """A role (actor, critic, reference, reward, cost) trained or served with FSDP2.

    ``model_path`` is a local HF model directory; ``None`` uses the built-in
    default task's model. ``tokenizer_path`` defaults to ``model_path``.

    Batch sizes are in samples (responses). ``mini_batch_size`` is global: the
    samples of one optimizer step summed over the data-parallel ranks (it must
    be divisible by their number). ``micro_batch_size`` is per rank: the
    samples of one forward/backward pass (gradients are accumulated over the
    micro-batches of a mini-batch). ``forward_micro_batch_size`` is the same
    for inference (log-probs, values, scores); ``None`` uses ``micro_batch_size``.
    """

    backend: str = "fsdp"
    model_path: str | None = None
    tokenizer_path: str | None = None
    optim: OptimConfig = attrs.field(factory=OptimConfig)
    mini_batch_size: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    micro_batch_size: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    forward_micro_batch_size: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    ppo_epochs: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    shuffle: bool = False
    """Shuffle samples into mini-batches (each epoch; seeded by ``seed`` and the update count)."""
    seed: int = 0
    dtype: Literal["float32", "bfloat16"] = attrs.field(
        default="float32", validator=attrs.validators.in_(("float32", "bfloat16"))
    )
    """Compute dtype. Trained roles keep float32 master weights (FSDP mixed precision)."""
    device: Literal["auto", "cpu", "cuda"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "cpu", "cuda"))
    )
    """``auto``: CUDA (the rank's local device) when available, else CPU."""
    gradient_checkpointing: bool = False
    reshard_after_forward: bool = True
    """FSDP2: free gathered weights after each forward (less memory, one more all-gather)."""
    remove_padding: bool = True
    """Log-prob and training passes drop the columns that are padding in every row of a
    micro-batch (leading prompt padding, response padding after the longest response)."""


@attrs.frozen(kw_only=True)
class HFRolloutConfig(RolloutConfig):
    """Batched HF ``generate`` with a KV cache on the actor's own weights.

    ``temperature: 0`` means greedy decoding; ``top_k: 0`` and ``top_p: 1``
    switch those filters off. ``n`` responses are sampled per prompt (the
    caller may override it per call). ``micro_batch_size`` caps the prompts of
    one ``generate`` call (``None``: all at once).
    """

    backend: str = "hf"
    max_prompt_length: int = attrs.field(default=64, validator=attrs.validators.ge(1))
    max_response_length: int = attrs.field(default=32, validator=attrs.validators.ge(1))
    temperature: float = attrs.field(default=1.0, validator=attrs.validators.ge(0.0))
    top_p: float = attrs.field(
        default=1.0, validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0)]
    )
    top_k: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    n: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    micro_batch_size: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    weight_sync: Literal["stream", "gather"] = attrs.field(
        default="stream", validator=attrs.validators.in_(("stream", "gather"))
    )
    """How a sharded actor's weights reach ``generate``: ``stream`` copies them one
    FSDP unit (transformer block) at a time into a generation module that exists
    only during the call (extra memory of the transition: about one block);
    ``gather`` unshards the whole FSDP model at once and generates on it."""


def run_config_problems(config: Any) -> list[str]:
    """Cross-section mistakes in a run config that uses the ``hf`` rollout."""
    rollout = getattr(config, "rollout", None)
    if isinstance(rollout, HFRolloutConfig) and rollout.n != 1:
        return [
            f"rollout.n={rollout.n} is not used by training runs: algorithms sample "
            "algorithm.n_samples_per_prompt responses per prompt; set that instead"
        ]
    return []
