"""The planner's count of a model's work: FLOPs per pass and bytes per decode step.

One model of the work, used twice: the simulator divides it by the
hardware's peaks to price a stage (:mod:`hfsdk_planner.simulator`), and a run
divides it by a stage's measured seconds to say how close the stage ran to
those peaks (:mod:`hfsdk_planner.utilisation`). The formulas count the
matmuls a dense transformer runs, checkable by hand (and checked against
``torch.utils.flop_counter.FlopCounterMode`` in the tests):

* a forward pass costs ``2 N`` FLOPs per token, ``N`` the parameters of the
  blocks' weight matrices (:func:`body_params`: no embeddings, whose lookup
  multiplies nothing, nor the norms' scales),
  plus the output head's ``2 h W`` at each position whose output is computed:
  the LM head (``W`` = vocabulary) only where the backend keeps logits (the
  response positions of a log-prob pass), a critic's or reward model's
  1-wide head (``W = 1``) at every position;
* training costs a forward and a backward (twice a forward) pass, ``6 N`` per
  token, plus one more forward of the blocks with activation recomputation
  (:func:`recomputed_params`: all but each layer's last matmul);
  a LoRA policy's backward computes only the input gradients of its frozen
  base (one forward's worth), plus the adapters' own forward and backward
  (``6 A`` per token, ``A`` = :func:`~hfsdk_planner.memory_model.lora_params`);
* a decode step reads the weights once (``weight_bytes x P``) plus the
  KV cache of every running sequence (at the same width), and multiplies
  ``2 N + 2 h V`` per sequence.

Attention's score and value products (``4 x layers x context x hidden`` per
token) are left out, as in the simulator: under 2 % of a step for the
sequence lengths the project trains here.
"""

from __future__ import annotations

from hfsdk_planner.model_spec import ModelSpec

FORWARD_PASSES = 1
TRAINING_PASSES = 3
"""A training pass is a forward and a backward pass, the backward costing two forwards."""
LORA_BASE_PASSES = 2
"""A LoRA policy's frozen base: a forward and the backward's input gradients only."""


def embedding_params(model: ModelSpec) -> int:
    """Parameters of the token embedding and, when untied, the LM head (``V h`` each)."""
    return model.vocab_size * model.hidden_size * (1 if model.tied_embeddings else 2)


def body_params(model: ModelSpec) -> int:
    """Parameters a token's forward pass multiplies in the blocks: their weight matrices,
    all parameters but the embeddings and the norms' scales (which multiply no matmul)."""
    norms = (2 * model.num_layers + 1) * model.hidden_size
    # A vision tower's parameters work on image patches, not on every token.
    return max(0, model.text_params - embedding_params(model) - norms)


def recomputed_params(model: ModelSpec) -> int:
    """Parameters gradient checkpointing multiplies again: the blocks' but the MLP's down
    projection, whose output no backward needs (torch's non-reentrant checkpoint stops
    recomputing once every saved tensor is back)."""
    return max(
        0, body_params(model) - model.num_layers * model.intermediate_size * model.hidden_size
    )


def forward_flops(
    model: ModelSpec,
    tokens: float,
    head_tokens: float | None = None,
    head_width: int | None = None,
) -> float:
    """FLOPs of one forward pass over ``tokens`` tokens: ``2 N tokens`` in the blocks plus
    ``2 h W`` at each of ``head_tokens`` positions (default: every token) of the output
    head ``W`` wide (default: the vocabulary, the LM head)."""
    head_tokens = tokens if head_tokens is None else head_tokens
    width = model.vocab_size if head_width is None else head_width
    return 2.0 * (body_params(model) * tokens + model.hidden_size * width * head_tokens)


def training_flops(
    model: ModelSpec,
    tokens: float,
    recompute: bool = False,
    head_tokens: float | None = None,
    head_width: int | None = None,
    lora_rank: int = 0,
) -> float:
    """FLOPs of forward + backward over ``tokens`` tokens: 3 forwards (:func:`forward_flops`),
    plus the blocks' forward again with activation recomputation (gradient checkpointing
    recomputes the layers, :func:`recomputed_params`, not the head). ``lora_rank`` > 0:
    a frozen base (a forward and the input gradients) plus rank-``lora_rank`` adapters
    trained in full."""
    forward = forward_flops(model, tokens, head_tokens, head_width)
    blocks = 2.0 * recomputed_params(model) * tokens if recompute else 0.0
    if not lora_rank:
        return TRAINING_PASSES * forward + blocks
    from hfsdk_planner.memory_model import lora_params  # memory_model imports workload

    adapters = 2.0 * lora_params(model, lora_rank) * tokens
    recomputed = adapters if recompute else 0.0
    return LORA_BASE_PASSES * forward + blocks + TRAINING_PASSES * adapters + recomputed


def decode_step_bytes(
    model: ModelSpec, running: float, context: float, weight_bytes: int = 2, tg: int = 1
) -> float:
    """Bytes one decode step reads on each of ``tg`` tensor-parallel devices: the weight
    shard (``weight_bytes x P / tg``) and the KV cache of ``running`` sequences of mean
    ``context`` tokens (split over at most the model's KV heads), held at the weights' width
    (the generation module allocates its cache in the weights' dtype)."""
    kv_split = min(tg, model.num_kv_heads)
    kv_bytes = running * context * model.kv_bytes_per_token(weight_bytes) / kv_split
    return weight_bytes * model.text_params / tg + kv_bytes  # decode reads no vision tower


def generation_flops(model: ModelSpec, sequences: float, prompt: float, steps: float) -> float:
    """FLOPs of generating ``steps`` tokens for ``sequences`` sequences after a prefill of
    ``prompt`` tokens each: ``2 (N + h V) x sequences x (prompt + steps)`` (the rollout's
    decoder computes logits at every position it runs, the prompt's included)."""
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
