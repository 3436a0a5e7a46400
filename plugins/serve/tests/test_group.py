"""The serve role's worker group at two ranks: Ray worker processes, the base sharded over them
(FSDP2), adapters replicated, gradients summed over them."""

from __future__ import annotations

import re
import signal
from typing import Any

import pytest
import tinker
from tinker import types

from .conftest import LOCAL_KEY, free_port
from .test_state import _batch, _logprobs, _serve, _wait_healthy

LR = types.AdamParams(learning_rate=1e-2)
STEPS = 5


def _greedy(client: Any, tokenizer: Any) -> list[Any]:
    sampler = client.save_weights_and_get_sampling_client().result()
    params = types.SamplingParams(max_tokens=4, temperature=0.0)
    return [
        sampler.sample(types.ModelInput.from_ints(tokenizer.encode(p)), 1, params)
        .result()
        .sequences[0]
        for p in ("3 + 4 =", "9 + 9 =")
    ]


def _train(client: Any, data: list[types.Datum], steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        fwd = client.forward_backward(data, "cross_entropy")
        opt = client.optim_step(LR)
        losses.append(fwd.result().metrics["loss:sum"])
        opt.result()
    return losses


@pytest.mark.distributed
@pytest.mark.heavy
def test_two_ranks_train_like_one_and_round_trip_state(
    served: Any, service_client: Any, tmp_path: Any
) -> None:
    """``hfsdk serve --devices 2``: two Ray ranks, each with half of every batch and half
    of the base weights (FSDP2 ``fully_shard``).

    Each rank holds ~1/2 of the base parameters' storage. The supervised loss falls,
    and every step's loss equals the one-rank server's to float rounding (the ranks'
    gradients are summed before AdamW; a missing or doubled all-reduce, a datum lost or
    counted twice, ranks drifting apart, a shard gathered wrongly would all show), also
    for a batch of one datum (rank 1 has none and joins the collective passes with a
    zero loss). Greedy samples (made on rank 0 with the base gathered) equal the one-rank
    server's. Saved state resumes bit for bit on the two ranks. ~4 min on the shared
    2-core machine (Ray start and two model loads), hence heavy.
    """
    data = _batch(served.tokenizer)
    base = str(served.model_dir)
    reference = service_client.create_lora_training_client(base_model=base, rank=8, seed=5)
    reference = reference.result()
    expected = _train(reference, data, STEPS)
    one = data[:1]  # rank 1 gets no datum
    expected_one = _train(reference, one, 1)
    expected_greedy = _greedy(reference, served.tokenizer)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # stderr to a file: Ray forwards the workers' output there, which could fill a pipe.
    log = (tmp_path / "serve.log").open("wb")
    state_dir = tmp_path / "state"
    proc = _serve(
        served.model_dir, state_dir, port, "--devices", "2", "--executor", "ray", stderr=log
    )
    try:
        _wait_healthy(url, proc, timeout_s=420)
        client = tinker.ServiceClient(base_url=url, api_key=LOCAL_KEY)
        trainer = client.create_lora_training_client(base_model=base, rank=8, seed=5).result()
        losses = _train(trainer, data, STEPS)
        assert losses == pytest.approx(expected, rel=1e-4), (losses, expected)
        assert losses[-1] < 0.5 * losses[0], losses
        assert _train(trainer, one, 1) == pytest.approx(expected_one, rel=1e-4)
        greedy = _greedy(trainer, served.tokenizer)
        assert [s.tokens for s in greedy] == [s.tokens for s in expected_greedy]
        for ours, theirs in zip(greedy, expected_greedy, strict=True):
            assert ours.logprobs == pytest.approx(theirs.logprobs, abs=1e-4)

        path = trainer.save_state("five").result().path
        saved = _logprobs(trainer, data)
        next_loss = _train(trainer, data, 1)
        after = _logprobs(trainer, data)
        resumed = client.create_training_client_from_state_with_optimizer(path).result()
        assert _logprobs(resumed, data) == saved
        assert _train(resumed, data, 1) == next_loss
        assert _logprobs(resumed, data) == after
        client.close("success").result()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        log.close()
    text = (tmp_path / "serve.log").read_text(errors="replace")
    assert "(2 rank(s), Ray worker processes)" in text, text[-2000:]
    found = re.search(r"share of the base held by each rank: ([0-9., ]+)", text)
    assert found, text[-2000:]
    shares = [float(x) for x in found.group(1).strip().rstrip(",").split(",")]
    assert len(shares) == 2 and all(abs(x - 0.5) < 0.02 for x in shares), shares
