"""Several users on one base model: one client trains, the other's numbers do not move."""

from __future__ import annotations

from typing import Any

from tinker import types

PROMPT = "3 + 5 ="


def _datum(tokenizer: Any, text: str) -> types.Datum:
    tokens = tokenizer.encode(text)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


def _observe(sampler: Any, trainer: Any, tokenizer: Any) -> tuple:
    """Seeded samples with their log-probs, prompt log-probs and a forward's log-probs."""
    prompt = types.ModelInput.from_ints(tokenizer.encode(PROMPT))
    sampled = sampler.sample(prompt, 3, types.SamplingParams(max_tokens=4, seed=7)).result()
    scored = sampler.compute_logprobs(
        types.ModelInput.from_ints(tokenizer.encode("3 + 5 = 8"))
    ).result()
    forward = trainer.forward([_datum(tokenizer, "2 + 2 = 4")], "cross_entropy").result()
    return (
        [(s.tokens, s.logprobs) for s in sampled.sequences],
        scored,
        forward.loss_fn_outputs[0]["logprobs"].tolist(),
    )


def test_frozen_client_is_bit_identical_while_another_trains(
    served: Any, service_client: Any
) -> None:
    """Two LoRA clients share the base model; 5 steps of one change nothing of the other.

    Catches adapters that share weights, gradients or optimizer state, a step
    that updates every adapter, or sampling that uses the wrong adapter.
    """
    tokenizer = served.tokenizer
    base = str(served.model_dir)
    frozen = service_client.create_lora_training_client(base_model=base, rank=4, seed=1).result()
    training = service_client.create_lora_training_client(base_model=base, rank=8, seed=2).result()
    # Give the frozen client weights of its own (B is zero at creation), then freeze it.
    frozen.forward_backward([_datum(tokenizer, "7 + 1 = 8")], "cross_entropy").result()
    frozen.optim_step(types.AdamParams(learning_rate=5e-2)).result()
    frozen_sampler = frozen.save_weights_and_get_sampling_client().result()
    before = _observe(frozen_sampler, frozen, tokenizer)
    training_sampler = training.save_weights_and_get_sampling_client().result()
    trained_before = training_sampler.compute_logprobs(
        types.ModelInput.from_ints(tokenizer.encode("3 + 5 = 8"))
    ).result()

    losses = []
    for _ in range(5):
        fwd = training.forward_backward([_datum(tokenizer, "3 + 5 = 8")], "cross_entropy")
        opt = training.optim_step(types.AdamParams(learning_rate=1e-2))
        losses.append(fwd.result().metrics["loss:sum"])
        opt.result()
        # Interleave the frozen client's reads with the other's steps.
        assert _observe(frozen_sampler, frozen, tokenizer) == before

    after = _observe(frozen_sampler, frozen, tokenizer)
    assert after == before  # tokens, sample log-probs, prompt log-probs, forward: bit for bit
    assert losses[-1] < 0.5 * losses[0], losses  # the other client really trained
    trained_after = (
        training.save_weights_and_get_sampling_client()
        .result()
        .compute_logprobs(types.ModelInput.from_ints(tokenizer.encode("3 + 5 = 8")))
        .result()
    )
    assert trained_after[-1] > trained_before[-1] + 0.5  # and its sampler sees the new weights
    # A snapshot sampler keeps the weights it was saved with.
    assert (
        training_sampler.compute_logprobs(
            types.ModelInput.from_ints(tokenizer.encode("3 + 5 = 8"))
        ).result()
        == trained_before
    )


def test_a_finished_session_frees_its_clients_and_leaves_the_others(
    served: Any, service_client: Any
) -> None:
    """``ServiceClient.close`` frees the session's adapters, optimizers, snapshots and samplers.

    Catches a finish that does nothing (every session's adapters stayed in memory for the
    server's life), one that frees another session's clients, and one that deletes the
    checkpoints saved to disk.
    """
    import httpx
    import tinker

    from .conftest import LOCAL_KEY

    tokenizer, base = served.tokenizer, str(served.model_dir)
    service = served.app.service
    other = service_client.create_lora_training_client(base_model=base, rank=4).result()
    other_sampler = other.save_weights_and_get_sampling_client().result()
    before = (len(service.adapters), len(service.models), len(service.samplers))

    finished = tinker.ServiceClient(base_url=served.url, api_key=LOCAL_KEY)
    trainer = finished.create_lora_training_client(base_model=base, rank=8).result()
    state = trainer.save_state("kept").result().path
    snapshots = [trainer.save_weights_and_get_sampling_client().result() for _ in range(2)]
    weights = trainer.save_weights_for_sampler("kept-sampler").result().path
    from_path = finished.create_sampling_client(model_path=weights).result()
    on_base = finished.create_sampling_client(base_model=base).result()
    assert len(service.adapters) == before[0] + 4  # the client, two snapshots, one path load
    finished.close("success").result()

    assert (len(service.adapters), len(service.models), len(service.samplers)) == before
    url, headers = f"{served.url}/api/v1", {"X-API-Key": LOCAL_KEY}
    gone = httpx.post(f"{url}/get_info", json={"model_id": trainer.model_id}, headers=headers)
    assert gone.status_code == 404 and "unknown model_id" in gone.json()["error"]
    for sampler in (*snapshots, from_path, on_base):
        gone = httpx.get(f"{url}/samplers/{sampler._sampling_session_id}", headers=headers)
        assert gone.status_code == 404 and "unknown sampling session" in gone.json()["error"]
    # The other session's clients still work, and the saved checkpoints stay on disk.
    prompt = types.ModelInput.from_ints(tokenizer.encode("3 + 5 = 8"))
    assert other_sampler.compute_logprobs(prompt).result()
    assert other.forward([_datum(tokenizer, "2 + 2 = 4")], "cross_entropy").result()
    resumed = service_client.create_training_client_from_state_with_optimizer(state).result()
    assert resumed.get_info().lora_rank == 8
    assert service_client.create_sampling_client(model_path=weights).result()
