"""Sampling through the rollout contract: the sampler's log-probs are the trainer's."""

from __future__ import annotations

from typing import Any

import numpy as np
from tinker import types


def test_sampler_logprobs_match_the_trainers_forward(served: Any, service_client: Any) -> None:
    """What a sample reports as log-probs is what ``forward`` computes for the same tokens.

    Importance ratios of an on-policy step are then 1: catches log-probs of the wrong
    position, at the wrong temperature or from another adapter, and seeds that are ignored.
    """
    tokenizer = served.tokenizer
    trainer = service_client.create_lora_training_client(
        base_model=str(served.model_dir), rank=8, seed=5
    ).result()
    tokens = tokenizer.encode("6 + 2 = 8")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:]},
    )
    trainer.forward_backward([datum], "cross_entropy").result()
    trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()
    prompt = tokenizer.encode("6 + 2 =")
    params = types.SamplingParams(max_tokens=4, temperature=1.0, seed=11)
    result = sampler.sample(types.ModelInput.from_ints(prompt), 3, params).result()
    again = sampler.sample(types.ModelInput.from_ints(prompt), 3, params).result()
    assert [s.tokens for s in result.sequences] == [s.tokens for s in again.sequences]
    data = []
    for seq in result.sequences:
        assert len(seq.tokens) == len(seq.logprobs) and seq.stop_reason in ("stop", "length")
        full = prompt + seq.tokens
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(full[:-1]),
                loss_fn_inputs={"target_tokens": full[1:]},
            )
        )
    forward = trainer.forward(data, "cross_entropy").result()
    for seq, out in zip(result.sequences, forward.loss_fn_outputs, strict=True):
        trained = out["logprobs"].to_numpy()[len(prompt) - 1 :]
        # float32, one forward padded in a batch vs one alone: reduction order only.
        np.testing.assert_allclose(trained, seq.logprobs, rtol=0, atol=1e-5)
    # compute_logprobs: None for the first token, then the same per-token numbers.
    scored = sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()
    assert scored[0] is None
    single = trainer.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"]
    np.testing.assert_allclose(scored[1:], single.to_numpy(), rtol=0, atol=1e-5)


def test_forward_backward_custom_runs_through_the_sdk(served: Any, service_client: Any) -> None:
    """A client-side custom loss equal to cross-entropy trains exactly like ``cross_entropy``.

    The SDK runs ``forward``, differentiates the loss locally and sends the gradient as
    ``cross_entropy`` weights: catches a server whose forward and backward disagree.
    """
    import torch

    tokens = served.tokenizer.encode("5 + 3 = 8")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )
    base = str(served.model_dir)
    plain = service_client.create_lora_training_client(base_model=base, rank=4, seed=9).result()
    custom = service_client.create_lora_training_client(base_model=base, rank=4, seed=9).result()

    def nll(data: list, logprobs: list) -> tuple:
        return -torch.stack([lp.sum() for lp in logprobs]).sum(), {}

    for _ in range(2):
        expected = plain.forward_backward([datum], "cross_entropy").result().metrics["loss:sum"]
        plain.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        got = custom.forward_backward_custom([datum], nll).result().metrics["loss:sum"]
        custom.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        assert abs(got - expected) < 1e-4 * max(1.0, abs(expected))
    after_plain = plain.forward([datum], "cross_entropy").result().loss_fn_outputs[0]
    after_custom = custom.forward([datum], "cross_entropy").result().loss_fn_outputs[0]
    np.testing.assert_allclose(
        after_custom["logprobs"].to_numpy(), after_plain["logprobs"].to_numpy(), atol=1e-4
    )


def test_compute_logprobs_scores_a_sequence_of_the_whole_context(
    served: Any, service_client: Any
) -> None:
    """The one token the SDK asks for is not counted: 128 of 128 positions give 128 entries."""
    import torch
    from transformers import AutoConfig

    sampler = service_client.create_sampling_client(base_model=str(served.model_dir)).result()
    context = AutoConfig.from_pretrained(served.model_dir).max_position_embeddings
    tokens = torch.randint(3, 26, (context,), generator=torch.Generator().manual_seed(0)).tolist()
    scored = sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()
    shorter = sampler.compute_logprobs(types.ModelInput.from_ints(tokens[:-1])).result()
    assert len(scored) == context and scored[0] is None
    np.testing.assert_allclose(scored[1:-1], shorter[1:], rtol=0, atol=1e-5)
    assert np.isfinite(scored[-1])


def test_unset_max_tokens_means_the_documented_default(served: Any, service_client: Any) -> None:
    """``SamplingParams()`` leaves max_tokens None: 16 tokens (docs/serve.md)."""
    from hfsdk_serve.service import DEFAULT_MAX_TOKENS

    tokenizer = served.tokenizer
    trainer = service_client.create_lora_training_client(
        base_model=str(served.model_dir), rank=4, seed=1
    ).result()
    tokens = tokenizer.encode("6 + 2 = 8")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:]},
    )
    for _ in range(3):  # trained on rows without EOS, it no longer stops on its own
        trainer.forward_backward([datum], "cross_entropy").result()
        trainer.optim_step(types.AdamParams(learning_rate=5e-2)).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(tokenizer.encode("6 + 2 ="))
    params = types.SamplingParams(temperature=1.0, seed=4)
    assert params.max_tokens is None and DEFAULT_MAX_TOKENS == 16
    result = sampler.sample(prompt, 3, params).result()
    assert [(len(s.tokens), s.stop_reason) for s in result.sequences] == [(16, "length")] * 3
