"""The planner's count of a model's work: FLOPs per pass and bytes per decode step.

One model of the work, used twice: the simulator divides it by the
hardware's peaks to price a stage (:mod:`hfsdk_planner.simulator`), and a run
divides it by a stage's measured seconds to say how close the stage ran to
those peaks (:mod:`hfsdk_planner.utilisation`). The formulas are the usual
dense-transformer ones, checkable by hand:

* a forward pass costs ``2 P`` FLOPs per token (one multiply and one add per
  parameter; ``P`` is :attr:`ModelSpec.num_params`, embeddings included);
* training costs a forward and a backward (twice a forward) pass, ``6 P`` per
  token, ``8 P`` with activation recomputation (one more forward);
* a decode step reads the weights once (``weight_bytes x P``) plus the
  KV cache of every running sequence, and multiplies ``2 P`` per sequence.

Attention's score and value products (``4 x layers x context x hidden`` per
token) are left out, as in the simulator: under 2 % of a step for the
sequence lengths the project trains here.
"""

from __future__ import annotations

from hfsdk_planner.model_spec import ModelSpec

FORWARD_PASSES = 1
TRAINING_PASSES = 3
"""A training pass is a forward and a backward pass, the backward costing two forwards."""


def forward_flops(model: ModelSpec, tokens: float) -> float:
    """FLOPs of one forward pass over ``tokens`` tokens: ``2 P tokens``."""
    return 2.0 * model.num_params * tokens


def training_flops(model: ModelSpec, tokens: float, recompute: bool = False) -> float:
    """FLOPs of forward + backward over ``tokens`` tokens: ``6 P tokens`` (``8 P`` with
    activation recomputation, which runs the forward twice)."""
    passes = TRAINING_PASSES + (1 if recompute else 0)
    return passes * forward_flops(model, tokens)


def decode_step_bytes(
    model: ModelSpec, running: float, context: float, weight_bytes: int = 2, tg: int = 1
) -> float:
    """Bytes one decode step reads on each of ``tg`` tensor-parallel devices: the weight
    shard (``weight_bytes x P / tg``) and the KV cache of ``running`` sequences of mean
    ``context`` tokens (split over at most the model's KV heads)."""
    kv_split = min(tg, model.num_kv_heads)
    kv_bytes = running * context * model.kv_bytes_per_token() / kv_split
    return weight_bytes * model.num_params / tg + kv_bytes


def generation_flops(model: ModelSpec, sequences: float, prompt: float, steps: float) -> float:
    """FLOPs of generating ``steps`` tokens for ``sequences`` sequences after a prefill of
    ``prompt`` tokens each: ``2 P x sequences x (prompt + steps)``."""
    return forward_flops(model, sequences * (prompt + steps))


def generation_bytes(
    model: ModelSpec,
    sequences: float,
    prompt: float,
    steps: float,
    running: float | None = None,
    weight_bytes: int = 2,
) -> float:
    """Bytes the decode steps read: ``steps`` steps per wave of ``running`` sequences
    (default: all at once), each step the weights and the mean context's KV cache
    (``prompt + steps / 2`` tokens: the cache grows by one token per step)."""
    running = min(running or sequences, sequences)
    full, rest = divmod(sequences, running)
    context = prompt + steps / 2
    per_step = full * decode_step_bytes(model, running, context, weight_bytes)
    if rest:
        per_step += decode_step_bytes(model, rest, context, weight_bytes)
    return steps * per_step
