"""The model directory's generation_config.json sampling defaults (a Qwen2-VL-Instruct's
``repetition_penalty``) never reach ``sample``: its tokens and log-probs are those of the
settings it passes, which the training forward recomputes."""

from __future__ import annotations

import pytest
import torch

from hfsdk_vision.generation import sample
from hfsdk_vision.tokens import expand_placeholders

from .images import noise_image

PENALTIES = {"repetition_penalty": 50.0, "no_repeat_ngram_size": 1}


def _encoded(processor):
    return processor(
        [expand_placeholders("<image> what colour is the square ?")], [[noise_image(0)]]
    )


@pytest.mark.parametrize("do_sample", [False, True], ids=["greedy", "sampled"])
def test_the_models_generation_defaults_do_not_change_the_samples(vlm, do_sample: bool) -> None:
    model, processor = vlm
    enc = _encoded(processor)
    own = model.generation_config
    plain = sample(model, enc, n=2, max_new_tokens=8, do_sample=do_sample, generator_seed=1)
    penalized = own.__class__.from_dict(own.to_dict())
    for key, value in PENALTIES.items():
        setattr(penalized, key, value)
    model.generation_config = penalized
    try:
        got = sample(model, enc, n=2, max_new_tokens=8, do_sample=do_sample, generator_seed=1)
        assert model.generation_config is penalized  # restored after the call
    finally:
        model.generation_config = own  # the session's shared model stays as loaded
    assert torch.equal(got.responses, plain.responses)
    torch.testing.assert_close(got.log_probs, plain.log_probs, atol=1e-6, rtol=0)
