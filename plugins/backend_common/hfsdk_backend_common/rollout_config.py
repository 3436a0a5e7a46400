"""The config of a rollout that samples from the actor's HF-format weights (``rollout``).

Shared by the ``hf`` rollout (either training backend) and rollouts that
extend it (vLLM): sampling settings, lengths and the decoder choice.
"""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk import RolloutConfig, help_field


@attrs.frozen(kw_only=True)
class HFRolloutConfig(RolloutConfig):
    """Batched HF ``generate`` with a KV cache on the actor's own weights.

    ``temperature: 0`` means greedy decoding; ``top_k: 0`` and ``top_p: 1``
    switch those filters off. ``n`` responses are sampled per prompt (the
    caller may override it per call). ``micro_batch_size`` caps the prompts of
    one ``generate`` call (``None``: all at once).
    """

    backend: str = help_field(
        "Rollout backend (hf: transformers generate on the actor's own weights).",
        default="hf",
    )
    max_prompt_length: int = help_field(
        "Widest prompt (tokens) the rollout accepts; follows from data.max_prompt_length (plus "
        "rollout.multi_turn.max_response_tokens with tools): leave it unset.",
        default=64,
        validator=attrs.validators.ge(1),
    )
    max_response_length: int = help_field(
        "Longest response in tokens; responses are padded to it (also the norm length of seq-"
        "mean-token-sum-norm).",
        default=32,
        validator=attrs.validators.ge(1),
    )
    temperature: float = help_field(
        "Sampling temperature (greedy generation ignores it).",
        default=1.0,
        validator=attrs.validators.ge(0.0),
    )
    top_p: float = help_field(
        "Nucleus sampling: keep the smallest token set with this much probability; 1 turns it off.",
        default=1.0,
        validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0)],
    )
    top_k: int = help_field(
        "Keep only the k most likely tokens; 0 turns it off.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    n: int = help_field(
        "Samples per prompt inside the rollout; must stay 1 in training (use "
        "algorithm.n_samples_per_prompt).",
        default=1,
        validator=attrs.validators.ge(1),
    )
    micro_batch_size: int | None = help_field(
        "Prompts per generate call; null: all at once.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
    )
    decoder: Literal["auto", "hfsdk", "transformers"] = help_field(
        "Decoding engine: hfsdk (the hybrid engine's KV-cache decoder; Llama models), "
        "transformers (model.generate; any model) or auto (hfsdk when the model is supported).",
        default="auto",
        validator=attrs.validators.in_(("auto", "hfsdk", "transformers")),
    )
    """Which code decodes an fsdp actor's responses (tensor-parallel ``rollout_layout.tp > 1``
    and the megatron actor always use the ``hfsdk`` decoder). ``hfsdk`` runs
    ``TPDecoder`` on the same weights: a preallocated KV cache, grouped-query
    attention without copying key/value heads and inverse-CDF sampling make it faster than
    ``generate`` on CPU; it decodes Llama models (no biases, plain RoPE, SwiGLU).
    ``transformers`` calls ``model.generate`` and works for every architecture."""
    weight_sync: Literal["stream", "gather"] = help_field(
        "How a sharded actor's weights reach generate: stream (one FSDP unit at a time, "
        "extra memory about one block) or gather (the whole model at once).",
        default="stream",
        validator=attrs.validators.in_(("stream", "gather")),
    )
    """How a sharded actor's weights reach ``generate``: ``stream`` copies them one
    FSDP unit (transformer block) at a time into a generation module that exists
    only during the call (extra memory of the transition: about one block);
    ``gather`` unshards the whole FSDP model at once and generates on it."""
