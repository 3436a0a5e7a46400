"""The decoder's products on oneDNN-reordered weights equal ``x @ W.T`` to float rounding."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hfsdk_backend_common.hybrid.decoder import DecoderShape, KVCache, TPDecoder
from hfsdk_backend_common.hybrid.llama_format import hf_llama_shape, hf_llama_to_megatron
from hfsdk_backend_common.hybrid.packed_linear import DecodeLinears, packing_available

needs_onednn = pytest.mark.skipif(
    not packing_available(torch.zeros(1, 1)), reason="this torch build has no oneDNN reorder"
)


def _within_rounding(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> None:
    """``got`` is ``x @ w.T`` up to rounding: float32 accumulation over K terms
    (K·eps32·(|x|@|w|ᵀ)) plus the result's rounding to ``got``'s dtype (eps·|x @ w.T|)."""
    x, w = x.double(), w.double()
    exact = x @ w.T
    accumulate = w.shape[1] * torch.finfo(torch.float32).eps * (x.abs() @ w.abs().T)
    bound = accumulate + torch.finfo(got.dtype).eps * exact.abs()
    assert ((got.double() - exact).abs() <= bound).all()


@needs_onednn
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [(1,), (32,), (3, 5)])
def test_packed_products_equal_the_plain_ones(dtype: torch.dtype, rows: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    w = torch.randn(96, 48).to(dtype)
    x = torch.randn(*rows, 48).to(dtype)
    linears = DecodeLinears({"w": w}, ["w"])
    # oneDNN has no bfloat16 inner product without AVX-512 BF16 or AMX (an AVX2 CPU): the
    # reorder fails and the products stay plain, which must be right all the same.
    assert "w" in linears.packed or dtype == torch.bfloat16
    _within_rounding(linears(x, "w"), x, w)


def test_weights_oneDNN_cannot_take_stay_plain() -> None:
    w64 = torch.randn(8, 4, dtype=torch.float64)
    linears = DecodeLinears({"w": w64}, ["w"])
    assert linears.packed == {}
    x = torch.randn(2, 4, dtype=torch.float64)
    assert torch.equal(linears(x, "w"), x @ w64.T)


@pytest.fixture(scope="module")
def weights() -> tuple[dict[str, torch.Tensor], Any]:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    named = {n: p.detach() for n, p in model.named_parameters()}
    return hf_llama_to_megatron(named, hf_llama_shape(config)), config


@needs_onednn
def test_the_decoder_multiplies_by_packed_weights_and_keeps_its_logits(weights: Any) -> None:
    shard, config = weights
    shape = DecoderShape.from_hf_config(config)
    packed = TPDecoder(shard, shape, tg=1, tp_rank=0)
    plain = TPDecoder(shard, shape, tg=1, tp_rank=0)
    plain.linear.packed.clear()
    assert set(packed.linear.packed) == {
        n for n in shard if n.endswith(("_qkv.weight", "_proj.weight", "_fc1.weight",
                                         "_fc2.weight", "output_layer.weight"))
    }  # fmt: skip
    ids = torch.randint(0, 64, (4, 7))
    positions = torch.arange(7).expand(4, 7)
    mask = torch.ones(7, 7, dtype=torch.bool).tril()[None, None].expand(4, 1, 7, 7)
    with torch.no_grad():
        a = packed.forward(ids, positions, mask, KVCache(7))
        b = plain.forward(ids, positions, mask, KVCache(7))
    # Two layers of float32 products in another order: far inside 1e-4 of logits of size ~1.
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
