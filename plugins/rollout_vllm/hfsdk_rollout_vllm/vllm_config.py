"""Configuration of the ``vllm`` rollout backend."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk import help_field
from hfsdk_backend_common.rollout_config import HFRolloutConfig

MAX_TEMPERATURE = 2.0
"""The highest temperature vLLM's ``SamplingParams`` accepts."""


def _vllm_temperature(_instance: object, _attribute: attrs.Attribute, value: float) -> None:
    # vLLM refuses more when it builds the SamplingParams, inside the worker: an internal
    # WorkerError at the first generation instead of one line at load.
    if value > MAX_TEMPERATURE:
        raise ValueError(
            f"'temperature' {value!r} is over {MAX_TEMPERATURE} (vLLM's limit), which the vllm "
            f"rollout cannot sample at; set rollout.temperature at most {MAX_TEMPERATURE}, or "
            "use rollout.backend=hf"
        )


@attrs.frozen(kw_only=True)
class VLLMRolloutConfig(HFRolloutConfig):
    """vLLM generation in the actor's process, fed the actor's weights after every update.

    The sampling keys (``temperature``, ``top_p``, ``top_k``, ``n``,
    ``max_prompt_length``, ``max_response_length``, ``micro_batch_size``) mean
    what they mean for the ``hf`` rollout, so switching backends changes no
    other setting. The rest sizes the engine:

    ``dtype``: ``auto`` generates in the actor's compute dtype.
    ``cpu_kv_cache_gib``: the KV cache on CPU (``VLLM_CPU_KVCACHE_SPACE``,
    whole GiB; vLLM's own default takes a large share of the machine's memory).
    ``gpu_memory_utilization``: the share of the GPU vLLM may fill (weights +
    KV cache); the actor's training state shares the device.
    ``sleep``: release the KV cache (and offload the weights) while the actor
    trains; ``auto`` does so where vLLM supports it (CUDA), not on CPU.
    ``max_num_seqs``: sequences decoded together. ``enforce_eager``: no CUDA
    graphs / compilation (faster start, slower decoding on GPU).

    ``rollout_log_probs`` are what the actor computes for the same tokens,
    ``log_softmax(logits / temperature)`` over the whole vocabulary, not the
    top-k/top-p-renormalised values the engine samples from; see
    :meth:`logprobs_mode`.
    """

    backend: str = help_field(
        "Rollout backend (vllm: a vLLM engine in the actor's process, fed the actor's weights "
        "after every update).",
        default="vllm",
    )
    temperature: float = help_field(
        "Sampling temperature, 0 to 2 (vLLM's limit; greedy generation ignores it).",
        default=1.0,
        validator=[attrs.validators.ge(0.0), _vllm_temperature],
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = help_field(
        "Generation dtype; auto: the actor's compute dtype.",
        default="auto",
        validator=attrs.validators.in_(("auto", "float32", "bfloat16", "float16")),
    )
    cpu_kv_cache_gib: int = help_field(
        "KV cache size on CPU in whole GiB (VLLM_CPU_KVCACHE_SPACE).",
        default=1,
        validator=attrs.validators.ge(1),
    )
    gpu_memory_utilization: float = help_field(
        "Share of the GPU vLLM may fill (weights + KV cache); the actor's training state "
        "shares the device.",
        default=0.4,
        validator=[attrs.validators.gt(0.0), attrs.validators.lt(1.0)],
    )
    # YAML reads a bare on/off as true/false (`sleep: on` in a file or an override): taken
    # back as the words, not refused as "bad value True".
    sleep: Literal["auto", "on", "off", True, False] = help_field(
        "Release the KV cache (and offload weights) while the actor trains: auto (where vLLM "
        "supports it, CUDA), on, off.",
        default="auto",
        converter=lambda value: {True: "on", False: "off"}.get(value, value),
        validator=attrs.validators.in_(("auto", "on", "off")),
    )
    max_num_seqs: int = help_field(
        "Sequences decoded together.",
        default=256,
        validator=attrs.validators.ge(1),
    )
    enforce_eager: bool = help_field(
        "No CUDA graphs / compilation (faster start, slower decoding on GPU).",
        default=True,
    )
    seed: int = help_field(
        "Sampling seed of the engine.",
        default=0,
    )
    verify_weights: bool = help_field(
        "Read the engine's weights back after every reload and compare them with what was "
        "streamed in (exact bit sums, sync/verified). On CPU a linear weight is read through "
        "its kernel, about (inputs) times a pass over it: see docs/reliability.md for the cost.",
        default=True,
    )

    @property
    def masks_vocabulary(self) -> bool:
        """Whether sampling cuts the vocabulary (``top_p < 1`` or ``top_k > 0``)."""
        return self.top_p < 1.0 or self.top_k > 0

    def logprobs_mode(self) -> Literal["raw_logprobs", "processed_logprobs"]:
        """vLLM's ``logprobs_mode`` whose values equal the actor's log-probs.

        vLLM 0.32 offers ``raw_logprobs`` (the model's logits, before
        temperature and top-k/top-p) and ``processed_logprobs`` (after
        temperature *and* top-k/top-p: renormalised over the kept tokens). The
        actor computes ``log_softmax(logits / temperature)`` (temperature 1 for
        greedy calls; both modes give that for greedy requests). So: temperature 1
        (or 0, greedy) takes the raw values, whatever top-k/top-p; another
        temperature without top-k/top-p takes the processed ones (temperature
        only). Another temperature *with* top-k/top-p has no matching mode; the
        processed values (the distribution actually sampled) are returned and
        :meth:`logprobs_caveat` says so.
        """
        if self.temperature in (0.0, 1.0):
            return "raw_logprobs"
        return "processed_logprobs"

    def logprobs_caveat(self) -> str | None:
        """One line when ``rollout_log_probs`` cannot equal the actor's (else ``None``)."""
        if self.temperature in (0.0, 1.0) or not self.masks_vocabulary:
            return None
        return (
            f"rollout.temperature={self.temperature} with top_p={self.top_p}/top_k={self.top_k}: "
            "vLLM returns no temperature-scaled full-vocabulary log-probs, so rollout_log_probs "
            "are renormalised over the kept tokens and rollout/log_prob_diff_* includes that "
            "gap; use temperature 1 (or top_p 1, top_k 0) for an exact weight-sync check"
        )
