"""``forward_backward`` runs a request in micro-batches of bounded tokens (memory per pass is
bounded by the micro-batch, not the request) with the gradients, losses and log-probs of one
pass over the whole request, for every served loss.

On a :class:`ServeWorker` built in process (rank 0 of 1), without the SDK: the test reads the
adapter's gradients directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from hfsdk_serve import training
from hfsdk_serve.adapters import AdapterSpec
from hfsdk_serve.losses import INPUTS, LOSSES
from hfsdk_serve.wire import DatumIn
from hfsdk_serve.worker import Refusal, ServeWorker

ADAPTER = "micro"
BOUND = 64
"""The micro-batch bound the tests set: the request below has ~190 tokens (~300 padded)."""


def _worker(model_dir: Path) -> ServeWorker:
    """The tiny model with one adapter whose B is not zero (so every LoRA weight has a grad)."""
    worker = ServeWorker(model_dir=str(model_dir))
    worker.pool.add(ADAPTER, AdapterSpec(rank=4, seed=3))
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for key, p in worker.pool.get(ADAPTER).params.items():
            if "lora_B" in key:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    return worker


@pytest.fixture(scope="module")
def worker(default_model_dir: Path) -> ServeWorker:
    """:func:`_worker` in the model's dtype (float32)."""
    return _worker(default_model_dir)


@pytest.fixture(scope="module")
def worker64(default_model_dir: Path) -> ServeWorker:
    """:func:`_worker` in float64: float32's summation order alone moves the gradients of a
    split request by ~5e-7 of their norm, which would hide a real difference at 1e-6."""
    worker = _worker(default_model_dir)
    worker.pool.peft.double()
    return worker


def _request(vocab: int, loss: str) -> list[DatumIn]:
    """Datums of uneven lengths with ``loss``'s inputs (sampler log-probs near the model's);
    the server refuses inputs a loss does not read."""
    rng = np.random.default_rng(0)
    data = []
    for n in (5, 31, 12, 40, 7, 22, 18, 33, 9, 14):
        tokens = rng.integers(0, vocab, n).tolist()
        mask = (rng.random(n) < 0.7).astype(np.float32)
        mask[0] = 1.0
        inputs = {
            "target_tokens": rng.integers(0, vocab, n).astype(np.int64),
            "weights": rng.random(n).astype(np.float32),
            "advantages": rng.normal(size=n).astype(np.float32),
            # Spread so that some ratios are clipped by ppo / cispo / gspo.
            "logprobs": (-np.log(vocab) + rng.normal(scale=0.5, size=n)).astype(np.float32),
            "sequence_ratio_mask": mask,
        }
        used = {k: v for k, v in inputs.items() if k in INPUTS[loss]}
        data.append(DatumIn(tokens=tokens, inputs=used))
    return data


def _run(worker: ServeWorker, data: list[DatumIn], loss: str) -> tuple[dict, list]:
    """One forward_backward from cleared gradients: its result and the adapter's gradients."""
    params = list(worker.pool.get(ADAPTER).params.values())
    for p in params:
        p.grad = None
    result = worker.forward_backward(ADAPTER, data, loss, {}, True)
    assert not isinstance(result, Refusal), result
    return result, [p.grad.clone() for p in params]


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_micro_batches_give_the_whole_requests_gradients_and_outputs(
    worker64: ServeWorker, loss: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = worker64
    data = _request(worker.pool.vocab_size, loss)
    whole, whole_grads = _run(worker, data, loss)  # the default bound: one pass
    monkeypatch.setattr(training, "MICRO_BATCH_TOKENS", BOUND)
    assert len(training.micro_batches(data, range(len(data)))) > 3
    split, split_grads = _run(worker, data, loss)
    assert split["indices"] == whole["indices"] == list(range(len(data)))
    # The loss is a float32 sum added up in another order: its rounding scales with the
    # datums' losses, not with their sum (which may cancel).
    scale = sum(abs(worker.forward_backward(ADAPTER, [d], loss, {}, False)["loss"]) for d in data)
    assert abs(split["loss"] - whole["loss"]) <= 1e-6 * scale
    for a, b in zip(split["logprobs"], whole["logprobs"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert any(bool(g.abs().sum() > 0) for g in whole_grads)
    for a, b in zip(split_grads, whole_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_no_forward_sees_more_than_the_bound(
    worker: ServeWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: one forward over all ten datums (10 x 40 padded tokens)."""
    # raising=False: before the fix there was no bound to set, and the test shows the one pass.
    monkeypatch.setattr(training, "MICRO_BATCH_TOKENS", BOUND, raising=False)
    seen: list[int] = []

    def record(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        seen.append(kwargs["input_ids"].numel())

    hook = worker.pool.peft.register_forward_pre_hook(record, with_kwargs=True)
    try:
        _run(worker, _request(worker.pool.vocab_size, "cross_entropy"), "cross_entropy")
    finally:
        hook.remove()
    assert len(seen) > 1
    assert max(seen) <= BOUND, seen


def test_a_refused_later_micro_batch_keeps_the_earlier_gradients(
    worker: ServeWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Earlier micro-batches were back-propagated when the last one's loss is not finite: the
    refusal puts the gradients back as they were before the request."""
    monkeypatch.setattr(training, "MICRO_BATCH_TOKENS", BOUND)
    data = _request(worker.pool.vocab_size, "importance_sampling")
    _, before = _run(worker, data[:2], "importance_sampling")
    data[-1].inputs["advantages"][0] = np.nan
    result = worker.forward_backward(ADAPTER, data, "importance_sampling", {}, True)
    assert isinstance(result, Refusal) and "not finite" in str(result.message)
    params = list(worker.pool.get(ADAPTER).params.values())
    for p, grad in zip(params, before, strict=True):
        torch.testing.assert_close(p.grad, grad, rtol=0, atol=0)


def test_target_logprobs_match_log_softmax(worker: ServeWorker) -> None:
    """The gather-minus-logsumexp log-probs are log_softmax's within float32 rounding."""
    data = _request(worker.pool.vocab_size, "cross_entropy")[:3]
    with worker.pool.active(ADAPTER, train=False), torch.no_grad():
        got = training.target_logprobs(worker.pool, data)
        for datum, logp in zip(data, got, strict=True):
            ids = torch.tensor([datum.tokens])
            logits = worker.pool.peft(input_ids=ids, use_cache=False).logits.float()[0]
            targets = torch.tensor(datum.inputs["target_tokens"])[:, None]
            expected = torch.log_softmax(logits, dim=-1).gather(1, targets)[:, 0]
            torch.testing.assert_close(logp, expected, rtol=1e-6, atol=2e-6)
