"""Greedy decoding at the generation layout equals HF's greedy on the same weights.

Pairs with pg = 2 decode across two generation pipeline stages (hidden states
sent stage to stage, the token broadcast from the last stage).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_common.hybrid.llama_format import hf_llama_shape, hf_llama_to_megatron
from hfsdk_backend_common.testing.launch import run_gloo

HERE = str(Path(__file__).parent)
PAIRS = [(1, 2, 1, 1), (2, 2, 1, 2), (1, 4, 1, 2), (2, 1, 1, 1), (2, 2, 2, 1), (2, 1, 2, 1),
         (4, 1, 2, 1), (2, 2, 2, 2), (4, 1, 4, 1)]  # fmt: skip


@pytest.fixture(scope="module")
def outcomes() -> list[dict]:
    return run_gloo(4, "decode_worker:run_all", path=[HERE], timeout=300)


@pytest.mark.distributed
@pytest.mark.parametrize("pair", PAIRS, ids=lambda c: "p{}t{}->pg{}tg{}".format(*c))
def test_greedy_after_train_to_generate_equals_hf(outcomes: list[dict], pair) -> None:
    for rank, per_rank in enumerate(outcomes):
        before, after = per_rank[pair]["results"]
        assert torch.equal(before["ours"], before["hf"]), (rank, pair)
        # After an update the next generation uses the new weights (fails on stale ones).
        assert not torch.equal(before["hf"], after["hf"])
        assert torch.equal(after["ours"], after["hf"]), (rank, pair)


@pytest.mark.distributed
@pytest.mark.parametrize("pair", PAIRS, ids=lambda c: "p{}t{}->pg{}tg{}".format(*c))
def test_sampling_agrees_inside_a_generation_replica(outcomes: list[dict], pair) -> None:
    # Every rank seeds its generator differently: only the deciding rank's draw may count.
    for per_rank in outcomes:
        mine = per_rank[pair]["results"][0]["sampled"]
        for other in (*per_rank[pair]["tp_ranks"], *per_rank[pair]["pp_ranks"]):
            assert torch.equal(outcomes[other][pair]["results"][0]["sampled"], mine)
        assert mine.max() < 96


@pytest.fixture(scope="module")
def tiny_decoder() -> TPDecoder:
    """A 2-layer Llama of 97 tokens as a tg = 1 decoder (importing transformers is the cost)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    weights = hf_llama_to_megatron(
        {n: p.detach() for n, p in model.named_parameters()}, hf_llama_shape(model.config)
    )
    return TPDecoder(weights, DecoderShape.from_hf_config(model.config), tg=1, tp_rank=0)


@pytest.mark.parametrize("bad", [500, 97, -1])
def test_a_prompt_id_outside_the_vocabulary_is_refused(tiny_decoder: TPDecoder, bad: int) -> None:
    """transformers raises IndexError on such an id; the decoder zeroed its embedding and
    sampled from a corrupted context."""
    ids = torch.tensor([[5, 6, bad, 8]])
    with pytest.raises(HfsdkError, match=rf"^token id {bad} in the prompt .* 97 ids") as info:
        tiny_decoder.generate(ids, torch.ones_like(ids), max_new_tokens=2, eos_ids=[96], pad_id=0)
    assert "tokenizer" in str(info.value)
    with pytest.raises(HfsdkError, match=rf"token id {bad} "):
        tiny_decoder.check_prompt_ids([5, bad])  # what a request server checks on submission


def test_padding_outside_the_vocabulary_is_not_a_prompt_id(tiny_decoder: TPDecoder) -> None:
    ids = torch.tensor([[500, 5, 6], [4, 5, 6]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    out = tiny_decoder.generate(ids, mask, max_new_tokens=2, eos_ids=[96], pad_id=500)
    assert out.shape == (2, 2)
