"""forward / forward_backward / optim_step on one client's adapter, on one rank.

A request's datums are cut into micro-batches of at most :data:`MICRO_BATCH_TOKENS`
(padded) tokens (:func:`micro_batches`); each micro-batch is right-padded into one
forward of the base model with the client's adapter active, its datums' losses
(:mod:`.losses`) are summed and (in :class:`~.worker.ServeWorker`) back-propagated
into that adapter's parameters, where gradients accumulate until :func:`optim_step`.
Every served loss is a sum of per-datum losses, so the split changes no gradient.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from hfsdk import HfsdkError
from hfsdk_serve.adapters import AdapterPool
from hfsdk_serve.losses import LossFn, check_inputs, loss_fn
from hfsdk_serve.wire import DatumIn

TOKEN_INPUTS = ("target_tokens",)

MICRO_BATCH_TOKENS = 4096
"""The most tokens (datums x the longest one's length, as padded) one forward / backward of
``forward_backward`` takes; a datum is never split, so a longer one is a micro-batch alone.
Memory grows with these tokens times the vocabulary (the logits and their gradient), and a
Tinker request may carry ~1,000 datums: one pass over all of them would not fit (at a 152k
vocabulary, 4,096 tokens peak at about 7 GB of logits and their gradients)."""


def micro_batches(data: Sequence[DatumIn], indices: Sequence[int]) -> list[list[int]]:
    """``indices`` in order, cut into runs whose padded size (count x longest datum) stays
    within :data:`MICRO_BATCH_TOKENS` (a datum longer than that is a run of its own)."""
    runs: list[list[int]] = []
    width = 0
    for i in indices:
        n = len(data[i].tokens)
        if runs and (len(runs[-1]) + 1) * max(width, n) <= MICRO_BATCH_TOKENS:
            runs[-1].append(i)
            width = max(width, n)
        else:
            runs.append([i])
            width = n
    return runs


def _check_datum(i: int, datum: DatumIn, vocab: int, limit: int, loss: str) -> None:
    n = len(datum.tokens)
    if n == 0:
        raise HfsdkError(f"datum {i}: model_input is empty; send at least one token")
    if limit and n > limit:
        raise HfsdkError(
            f"datum {i}: {n} input tokens exceed the model's context of {limit}; truncate it"
        )
    if "target_tokens" not in datum.inputs:
        raise HfsdkError(
            f"datum {i}: loss_fn_inputs lacks 'target_tokens' (the next token at every input "
            "position); every loss needs it"
        )
    try:
        check_inputs(loss, datum.inputs)
    except HfsdkError as exc:
        raise HfsdkError(f"datum {i}: {exc}") from None
    for name, value in datum.inputs.items():
        if value.ndim != 1:
            # What tinker_cookbook's distillation sends: K weighted targets per position.
            raise HfsdkError(
                f"datum {i}: loss_fn_inputs[{name!r}] has shape {list(value.shape)}: (N, K) "
                "targets (several target tokens per position) are not served; send every loss "
                "input 1-D, one value per input token"
            )
        if value.shape != (n,):
            raise HfsdkError(
                f"datum {i}: loss_fn_inputs[{name!r}] has shape {list(value.shape)} but "
                f"model_input has {n} tokens; every loss input needs one value per input token"
            )
    for name, values in (
        ("model_input", np.asarray(datum.tokens)),
        ("target_tokens", datum.inputs["target_tokens"]),
    ):
        # A float tensor may carry NaN or fractions, which the cast to long would garble.
        whole = np.isfinite(values) & (values == np.floor(values))
        bad = values[~whole | (values < 0) | (values >= vocab)]
        if bad.size:
            raise HfsdkError(
                f"datum {i}: {name} holds {bad[:3].tolist()}, not token ids in the vocabulary "
                f"[0, {vocab}); encode with this model's tokenizer"
            )


def target_logprobs(pool: AdapterPool, data: Sequence[DatumIn]) -> list[torch.Tensor]:
    """Per datum, the active adapter's ``log p(target_tokens[i] | model_input[:i+1])``."""
    width = max(len(d.tokens) for d in data)
    pad = pool.tokenizer.pad_token_id or 0
    ids = torch.full((len(data), width), pad, dtype=torch.long)
    mask = torch.zeros((len(data), width), dtype=torch.long)
    targets = torch.zeros((len(data), width), dtype=torch.long)
    for row, datum in enumerate(data):
        ids[row, : len(datum.tokens)] = torch.tensor(datum.tokens, dtype=torch.long)
        mask[row, : len(datum.tokens)] = 1
        # A copy: arrays that crossed a process boundary arrive read-only.
        targets[row, : len(datum.tokens)] = torch.tensor(
            datum.inputs["target_tokens"], dtype=torch.long
        )
    logits = pool.peft(input_ids=ids, attention_mask=mask, use_cache=False).logits.float()
    # The target's logit less the log-normaliser, over the whole batch at once: no
    # full-vocabulary log_softmax is kept for the backward pass, and the per-datum slices
    # below are of (datums, tokens) tensors, whose backward is small.
    picked = logits.gather(2, targets[:, :, None])[:, :, 0]
    logp = picked - torch.logsumexp(logits, dim=-1)
    return [logp[row, : len(datum.tokens)] for row, datum in enumerate(data)]


def idle_loss(pool: AdapterPool) -> torch.Tensor:
    """A zero loss through one forward of the active adapter (on a one-token input).

    For a rank without a datum when the base is sharded: every forward and backward
    gathers the base over all ranks, so each rank runs one of each; this one adds zero
    gradients (the ranks' gradients are summed before the step).
    """
    ids = torch.tensor([[pool.tokenizer.pad_token_id or 0]], dtype=torch.long)
    return pool.peft(input_ids=ids, use_cache=False).logits.sum() * 0.0


def check_request(pool: AdapterPool, data: Sequence[DatumIn], loss_name: str) -> LossFn:
    """The loss of ``loss_name`` once every datum of the request is valid (else one error)."""
    if not data:
        raise HfsdkError("forward_backward got no datums; send at least one")
    fn = loss_fn(loss_name)
    for i, datum in enumerate(data):
        _check_datum(i, datum, pool.vocab_size, pool.max_length, loss_name)
    return fn


def datum_losses(
    pool: AdapterPool, data: Sequence[DatumIn], fn: LossFn, config: Mapping[str, float | str]
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Per datum log-probs under the active adapter, and the summed loss (with its graph)."""
    total = torch.zeros(())
    if not data:
        return [], total
    logps = target_logprobs(pool, data)
    for datum, logp in zip(data, logps, strict=True):
        inputs = {
            k: torch.tensor(v, dtype=torch.float32)
            for k, v in datum.inputs.items()
            if k not in TOKEN_INPUTS
        }
        total = total + fn(logp, inputs, config)
    return logps, total


def check_adam(params: Mapping[str, float]) -> None:
    """Refuse hyper-parameters AdamW cannot use (one line naming the field)."""
    for key in ("learning_rate", "beta1", "beta2", "eps", "weight_decay"):
        if not math.isfinite(params[key]) or params[key] < 0:
            raise HfsdkError(f"AdamParams.{key}={params[key]}: expected a finite value >= 0")
    if params["eps"] == 0:  # a parameter whose gradient is 0 would step by 0/0
        raise HfsdkError("AdamParams.eps=0: expected a value > 0 (the SDK's default is 1e-12)")
    if not (params["beta1"] < 1 and params["beta2"] < 1):
        raise HfsdkError("AdamParams beta1 and beta2 must be below 1")
    # The SDK documents 0.0 as "no clipping"; a negative norm was silently the same.
    clip = params.get("grad_clip_norm", 0.0)
    if not math.isfinite(clip) or clip < 0:
        raise HfsdkError(
            f"AdamParams.grad_clip_norm={clip}: expected a finite value >= 0 (0 turns "
            "clipping off, a positive value is the largest global gradient norm)"
        )


def optim_step(pool: AdapterPool, model_id: str, params: Mapping[str, float]) -> dict[str, float]:
    """One AdamW step of the client's adapter with the request's hyper-parameters.

    Gradients are cleared after the step. ``grad_clip_norm`` > 0 clips the global norm first.
    """
    adapter = pool.get(model_id)
    optimizer = adapter.optimizer
    if optimizer is None:
        raise HfsdkError(f"model {model_id!r} is a sampler snapshot; it has no optimizer")
    check_adam(params)
    for group in optimizer.param_groups:
        group["lr"] = params["learning_rate"]
        group["betas"] = (params["beta1"], params["beta2"])
        group["eps"] = params["eps"]
        group["weight_decay"] = params["weight_decay"]
    trained = list(adapter.params.values())
    grads = [p.grad for p in trained if p.grad is not None]
    norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))) if grads else 0.0
    if not math.isfinite(norm):  # e.g. 0 * inf from a sampler log-prob of -1e30: keep the weights
        optimizer.zero_grad(set_to_none=True)
        raise HfsdkError(
            f"the accumulated gradients are not finite (norm {norm}); no step was taken and they "
            "were cleared: check the loss inputs of the forward_backward calls since the last step"
        )
    clip = params.get("grad_clip_norm", 0.0)  # checked above: 0 is off
    if clip > 0 and grads:
        torch.nn.utils.clip_grad_norm_(trained, clip)
    optimizer.step()
    pool.touch(model_id)
    optimizer.zero_grad(set_to_none=True)
    adapter.steps += 1
    return {"grad_norm:mean": norm}
