"""LoRA merge of GPT-2-style ``Conv1D`` modules (peft's ``fan_in_fan_out``): the merged
model computes what the peft model does, for square and non-square modules alike."""

from __future__ import annotations

import pytest
import torch

from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_fsdp.lora import attach_adapters, fan_in_fan_out_modules, merged_state

transformers = pytest.importorskip("transformers")


def _gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        vocab_size=64,
        n_positions=16,
        n_embd=32,
        n_layer=1,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize(
    "targets",
    [
        ("attn.c_proj",),  # square (32, 32): a missing transpose would pass silently
        ("c_attn", "c_fc"),  # non-square: (32, 96) and (32, 128)
    ],
)
def test_merged_conv1d_weights_compute_what_the_adapters_do(targets) -> None:
    with pytest.warns(UserWarning, match="fan_in_fan_out"):  # peft turns it on for Conv1D
        peft_model = attach_adapters(
            _gpt2(), LoraConfig(rank=4, alpha=8.0, target_modules=targets), seed=0
        )
    assert fan_in_fan_out_modules(peft_model)  # every targeted module here is a Conv1D
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)  # B starts at 0: make the adapters matter
    ids = torch.tensor([[1, 5, 9, 3, 7, 2]])
    with torch.no_grad():
        expected = peft_model(input_ids=ids).logits
        base = _gpt2()
        assert (base(input_ids=ids).logits - expected).abs().max() > 1e-2  # adapters matter
        state = merged_state(peft_model, peft_model.state_dict())
        missing, unexpected = base.load_state_dict(state, strict=False)
        assert not unexpected and not [k for k in missing if k in dict(base.named_parameters())]
        got = base(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
