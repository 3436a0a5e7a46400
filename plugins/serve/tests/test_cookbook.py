"""A loop written with tinker_cookbook's renderer and datum helper, against ``hfsdk serve``.

Only the parts of the cookbook that need no download: the ``role_colon`` renderer
(on the served model's own tokenizer) and ``conversation_to_datum``.
"""

from __future__ import annotations

from typing import Any

import pytest
from tinker import types

renderers = pytest.importorskip("tinker_cookbook.renderers")
supervised_data = pytest.importorskip("tinker_cookbook.supervised.data")


def addition(a: int, b: int) -> list[Any]:
    """One user turn 'a + b =', one assistant turn 'c'."""
    return [
        renderers.Message(role="user", content=f"{a} + {b} ="),
        renderers.Message(role="assistant", content=str(a + b)),
    ]


@pytest.mark.slow
def test_cookbook_supervised_loop_and_sampling(served: Any, service_client: Any) -> None:
    """Renderer-built data trains (loss falls), and a renderer-parsed sample comes back.

    The tiny model's word-level tokenizer encodes the renderer's ``User:``/``Assistant:``
    as ``<unk>``, so ``\\n\\nUser:`` never appears in a decoded sample here: this checks
    that the stop strings are accepted and the response parses; test_stops.py checks
    the cut itself.

    Catches datums the server reads wrong (weights, targets, the cookbook's mean
    reduction), steps that do not train, and stop strings the sampler refuses.
    """
    trainer = service_client.create_lora_training_client(
        base_model=str(served.model_dir), rank=8, seed=3
    ).result()
    renderer = renderers.get_renderer("role_colon", trainer.get_tokenizer())
    batch = [
        supervised_data.conversation_to_datum(addition(a, b), renderer, max_length=64)
        for a in range(0, 10, 3)
        for b in range(1, 10, 4)
    ]
    assert all(sum(d.loss_fn_inputs["weights"].tolist()) > 0 for d in batch)
    losses = []
    for _ in range(6):
        fwd_bwd = trainer.forward_backward(batch, "cross_entropy")
        optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
        losses.append(fwd_bwd.result().metrics["loss:sum"] / len(batch))
        optim.result()
    # Measured (LoRA seeds 3, 0, 11): 5.77 nats per answer at step 0; the mean of the last
    # two steps 0.54, 1.16, 0.77 (lr 1e-2 oscillates a little, hence two steps averaged).
    # A step that does not train leaves it near 5.8.
    assert (losses[-1] + losses[-2]) / 2 < 0.4 * losses[0], losses

    sampler = trainer.save_weights_and_get_sampling_client().result()
    prompt = renderer.build_generation_prompt([renderers.Message(role="user", content="3 + 5 =")])
    params = types.SamplingParams(
        max_tokens=12, temperature=1.0, seed=7, stop=renderer.get_stop_sequences()
    )
    result = sampler.sample(prompt, 2, params).result()
    for seq in result.sequences:
        message, _ = renderer.parse_response(seq.tokens)
        assert message["role"] == "assistant" and isinstance(message["content"], str)
        assert len(seq.tokens) == len(seq.logprobs) >= 1
