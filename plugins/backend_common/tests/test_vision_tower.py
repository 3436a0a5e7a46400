"""``freeze_vision_tower``: an image-text model's encoder by its transformers name, or one line."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hfsdk import HfsdkError
from hfsdk_backend_common.vision_tower import freeze_vision_tower


class _Captioner(torch.nn.Module):
    """A language model beside an image encoder named as LLaVA names it."""

    def __init__(self) -> None:
        super().__init__()
        self.vision_tower = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        self.language_model = torch.nn.Linear(2, 3)


def test_the_vision_tower_is_frozen_and_the_rest_trains() -> None:
    model = _Captioner()
    assert freeze_vision_tower(model, "actor.freeze_vision") == 4 * 4 + 4 + 4 * 2 + 2
    assert not any(p.requires_grad for p in model.vision_tower.parameters())
    assert all(p.requires_grad for p in model.language_model.parameters())


def test_a_text_model_is_refused_in_one_line() -> None:
    config = LlamaConfig(
        vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2,
    )  # fmt: skip
    with pytest.raises(HfsdkError, match=r"^actor\.freeze_vision=true but LlamaForCausalLM has "
                       r"no vision tower .*set actor\.freeze_vision: false") as info:  # fmt: skip
        freeze_vision_tower(LlamaForCausalLM(config), "actor.freeze_vision")
    assert "\n" not in str(info.value)
