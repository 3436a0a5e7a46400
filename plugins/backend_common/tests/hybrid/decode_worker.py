"""Rank side of the decoding tests: HF Llama -> training shards -> reshard -> TP decode."""

from __future__ import annotations

from typing import Any

import torch

from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_common.hybrid.groups import create_groups
from hfsdk_backend_common.hybrid.layout import (
    HeadShape,
    TrainLayout,
    generation_layout,
    generation_pp_groups,
    generation_tp_groups,
    validate,
)
from hfsdk_backend_common.hybrid.llama_format import (
    hf_llama_shape,
    hf_llama_to_megatron,
    llama_specs,
    tp_slice,
)
from hfsdk_backend_common.hybrid.reshard import HybridEngine
from hfsdk_backend_common.hybrid.stages import StageLink

# The last five decode over generation pipeline stages (pg = 2, and pg = 4 with middle stages).
PAIRS = [(1, 2, 1, 1), (2, 2, 1, 2), (1, 4, 1, 2), (2, 1, 1, 1), (2, 2, 2, 1), (2, 1, 2, 1),
         (4, 1, 2, 1), (2, 2, 2, 2), (4, 1, 4, 1)]  # fmt: skip


def tiny_llama(seed: int) -> Any:
    """A random Llama (8 query / 4 kv heads, 4 layers) with peaked logits; same on every rank."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=8,
        max_position_embeddings=64,
        initializer_range=0.2,
        eos_token_id=2,
        pad_token_id=0,
        bos_token_id=1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def prompts() -> tuple[torch.Tensor, torch.Tensor]:
    """Three left-padded prompts."""
    ids = torch.tensor([[0, 0, 5, 9, 14, 3], [7, 8, 9, 10, 11, 12], [0, 0, 0, 0, 40, 41]])
    return ids, (ids != 0).long()


def hf_greedy(model: Any, new_tokens: int) -> torch.Tensor:
    """HF greedy responses padded to ``new_tokens`` (the reference)."""
    ids, mask = prompts()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=new_tokens,
            do_sample=False,
            eos_token_id=2,
            pad_token_id=0,
        )[:, ids.shape[1] :]
    padded = torch.zeros(ids.shape[0], new_tokens, dtype=torch.long)
    padded[:, : out.shape[1]] = out
    return padded


def updated(model: Any) -> Any:
    """An optimizer step's worth of change to every weight (in place; same on every rank)."""
    with torch.no_grad():
        for param in model.parameters():
            noise = torch.randn(param.shape, generator=torch.Generator().manual_seed(param.numel()))
            param.add_(0.3 * noise)
    return model


_CACHE: dict[str, Any] = {}


def references() -> dict[str, Any]:
    """The model's full megatron weights and HF greedy, before and after an update (cached)."""
    if not _CACHE:
        model = tiny_llama(0)
        shape = hf_llama_shape(model.config)
        _CACHE["config"] = model.config
        # Cloned: some converted tensors alias the parameters the update changes in place.
        full = {k: v.clone() for k, v in hf_llama_to_megatron(model.state_dict(), shape).items()}
        _CACHE["before"] = (full, hf_greedy(model, 8))
        model = updated(model)
        _CACHE["after"] = (hf_llama_to_megatron(model.state_dict(), shape), hf_greedy(model, 8))
    return _CACHE


def decode_pair(rank: int, world: int, p: int, t: int, pg: int, tg: int) -> dict[str, Any]:
    """Train shard at (p, t) -> generation at (pg, tg) -> greedy; then an update and again."""
    refs = references()
    shape = hf_llama_shape(refs["config"])
    specs = llama_specs(shape)
    train = TrainLayout(p, t, world // (p * t))
    gen = generation_layout(train, tp=tg, pp=pg)
    validate(train, gen, HeadShape(num_layers=4, num_heads=8, num_kv_heads=4))
    groups = create_groups(train, gen)
    engine = HybridEngine(
        train=train, gen=gen, specs=specs, num_layers=4, rank=rank, micro_dp=groups.micro_dp
    )
    tp_ranks = next(g for g in generation_tp_groups(train, gen) if rank in g)
    pp_ranks = next(g for g in generation_pp_groups(train, gen) if rank in g)
    stages = StageLink(ranks=pp_ranks, rank=rank, group=groups.gen_pp)
    i, j, _ = train.coords(rank)
    full = refs["before"][0]
    shard = {s.name: tp_slice(full[s.name], s, t, j) for s in specs if s.stage(p, 4) == i}
    results = []
    for round_ in range(2):
        if round_ == 1:
            # An optimizer step: change the model, write the new slices into the
            # training tensors in place (as an optimizer would).
            full = refs["after"][0]
            for s in specs:
                if s.name in shard:
                    shard[s.name].copy_(tp_slice(full[s.name], s, t, j))
        decoder = TPDecoder(
            engine.to_generation(shard),
            DecoderShape.from_hf_config(refs["config"]),
            tg=tg,
            tp_rank=engine.place.gen_tp,
            tp_group=groups.gen_tp,
            tp_ranks=tp_ranks,
            stages=stages,
        )
        ids, mask = prompts()
        ours = decoder.generate(ids, mask, max_new_tokens=8, eos_ids=[2], pad_id=0)
        sampled = decoder.generate(
            ids, mask, max_new_tokens=8, eos_ids=[2], pad_id=0, greedy=False,
            sampling={"temperature": 0.8, "top_k": 20, "top_p": 0.9},
            generator=torch.Generator().manual_seed(rank),
        )  # fmt: skip
        results.append(
            {
                "ours": ours,
                "hf": refs["after" if round_ else "before"][1],
                "sampled": sampled,
                "stats": engine.stats,
            }
        )
        engine.to_training()
    return {"results": results, "tp_ranks": tp_ranks, "pp_ranks": pp_ranks}


def run_all(rank: int, world: int) -> dict[tuple, dict[str, Any]]:
    """Every layout pair on the same 4 ranks."""
    return {pair: decode_pair(rank, world, *pair) for pair in PAIRS}
