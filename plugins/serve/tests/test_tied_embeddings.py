"""A base model with tied input and output embeddings: the sampler samples what was trained.

The LM head's LoRA (``train_unembed``) adapts the head only, so the trained policy's head
is ``embed + delta`` while its input embeddings stay the base's: a sampler on the tied
architecture would drop the delta and sample the base model's head.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tinker import types

from .conftest import LOCAL_KEY, Served, start


@pytest.fixture(scope="module")
def tied_model_dir(default_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama whose LM head is its input embeddings (``tie_word_embeddings``)."""
    from hfsdk import load_tokenizer
    from hfsdk_testing.models import save_tiny_llama

    return save_tiny_llama(
        tmp_path_factory.mktemp("tied_model"),
        load_tokenizer(default_model_dir),
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        num_kv_heads=2,
        tied=True,
        init_std=0.2,
    )


@pytest.fixture(scope="module")
def tied_served(tied_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A loopback server of the tied model."""
    running = start(tied_model_dir, tmp_path_factory.mktemp("tied_state"))
    yield running
    running.stop()


@pytest.mark.parametrize(
    "layers",
    [dict(train_attn=False, train_mlp=False, train_unembed=True), {}],
    ids=["unembed_only", "default_layers"],
)
def test_snapshot_sampler_scores_what_forward_scores_on_a_tied_base(
    tied_served: Served, layers: dict[str, bool]
) -> None:
    """After steps at a high learning rate, ``compute_logprobs`` of the saved weights equals
    the trainer's ``forward``: catches a sampler whose head lost its adapter (the base's)."""
    import tinker

    with tinker.ServiceClient(base_url=tied_served.url, api_key=LOCAL_KEY) as service:
        trainer = service.create_lora_training_client(
            base_model=str(tied_served.model_dir), rank=4, seed=0, **layers
        ).result()
        tokens = tied_served.tokenizer.encode("3 + 4 = 7")
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(tokens[:-1]),
            loss_fn_inputs={"target_tokens": tokens[1:]},
        )
        for _ in range(2):
            trainer.forward_backward([datum], "cross_entropy").result()
            trainer.optim_step(types.AdamParams(learning_rate=5e-2)).result()
        forward: Any = trainer.forward([datum], "cross_entropy").result()
        trained = forward.loss_fn_outputs[0]["logprobs"].to_numpy()
        sampler = trainer.save_weights_and_get_sampling_client().result()
        scored = sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()
        base = service.create_sampling_client(base_model=str(tied_served.model_dir)).result()
        untrained = base.compute_logprobs(types.ModelInput.from_ints(tokens)).result()
    # The steps moved the policy (else equality below proves nothing).
    assert np.abs(np.asarray(untrained[1:]) - trained).max() > 0.1
    np.testing.assert_allclose(scored[1:], trained, rtol=0, atol=1e-4)


def test_a_rollout_that_cannot_untie_the_head_refuses_a_head_adapter(
    tied_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollout built from the model directory's tied config (vLLM) would drop the head's
    delta and sample the base head silently: selecting such an adapter is refused, while
    one that leaves the head alone is served."""
    from hfsdk import HfsdkError
    from hfsdk_serve import sampling
    from hfsdk_serve.adapters import AdapterPool, AdapterSpec

    hf_rollout = sampling.get_registry("rollout_backends")["hf"].impl
    monkeypatch.setattr(hf_rollout, "builds_from_actor_config", False)  # "hf" acting as vLLM
    pool = AdapterPool(tied_model_dir)
    pool.add("head", AdapterSpec(rank=2))
    pool.add("body", AdapterSpec(rank=2, train_unembed=False))
    sampler = sampling.PoolSampler(pool, "hf")
    try:
        assert not sampler.source.untied_head
        with pytest.raises(HfsdkError, match="train_unembed=False"):
            sampler.select("head")
        sampler.select("body")
    finally:
        sampler.close()
