"""The megatron actor generates through the 3D-HybridEngine at ``actor.rollout_layout``.

Greedy responses equal HF ``generate`` on the same weights for (p, t) -> (pg, tg)
in {(1,2)->(1,1), (2,2)->(1,2), (1,4)->(1,2), (2,1)->(1,1)} and, decoding over
two generation pipeline stages, {(2,1)->(2,1), (2,2)->(2,1)}, before and after
an ``update_actor`` step (a stale generation shard would fail the second check).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk.core.hybrid_engine.launch import run_gloo

HERE = str(Path(__file__).parent)
PAIRS = [(1, 2, 1, 1), (2, 2, 1, 2), (1, 4, 1, 2), (2, 1, 1, 1), (2, 1, 2, 1), (2, 2, 2, 1)]
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]


def _save_model(directory: Path, tokenizer_dir: Path) -> Path:
    """A tiny Llama with 8 query / 4 key-value heads (t=4 divides both), peaked logits."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir))
    config = LlamaConfig(
        vocab_size=len(tokenizer) + 1,  # odd: padded to a multiple of tp
        hidden_size=64,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 0.2)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def _hf_greedy(model: Any, prompts: dict, width: int, eos: int, pad: int) -> torch.Tensor:
    with torch.no_grad():
        out = model.generate(
            input_ids=prompts["input_ids"],
            attention_mask=prompts["attention_mask"],
            max_new_tokens=width,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=pad,
        )[:, prompts["input_ids"].shape[1] :]
    padded = torch.full((len(out), width), pad, dtype=torch.long)
    padded[:, : out.shape[1]] = out
    # After the first EOS the rollout writes padding.
    for row in padded:
        hits = (row == eos).nonzero()
        if len(hits):
            row[hits[0, 0] + 1 :] = pad
    return padded


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_assets: Any) -> dict[str, Any]:
    from transformers import PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("megatron-hybrid")
    path = _save_model(root / "model", tiny_assets.tokenizer_dir)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    encoded = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    prompts = {"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
    outcomes = run_gloo(
        4, "hybrid_worker:run_all", {"path": str(path), "prompts": prompts}, path=[HERE],
        timeout=900,
    )  # fmt: skip
    return {"path": path, "prompts": prompts, "outcomes": outcomes, "tokenizer": tokenizer}


@pytest.mark.distributed
@pytest.mark.parametrize("pair", PAIRS, ids=lambda c: "p{}t{}->pg{}tg{}".format(*c))
def test_greedy_equals_hf_before_and_after_update_actor(run: dict[str, Any], pair) -> None:
    from transformers import AutoModelForCausalLM

    p, t, _, _ = pair
    tok = run["tokenizer"]
    eos, pad = tok.eos_token_id, tok.pad_token_id
    dp = 4 // (p * t)
    rows = torch.arange(len(PROMPTS)).chunk(dp)[0]  # replica 0's prompts
    mine = {k: v[rows] for k, v in run["prompts"].items()}
    collected = next(o[pair] for o in run["outcomes"] if o[pair]["collect"])
    model = AutoModelForCausalLM.from_pretrained(str(run["path"])).eval()
    assert torch.equal(collected["first"], _hf_greedy(model, mine, 6, eos, pad))
    model.load_state_dict(collected["state"], strict=False)
    after = _hf_greedy(model, mine, 6, eos, pad)
    assert not torch.equal(after, collected["first"]), "the update did not change greedy output"
    assert torch.equal(collected["second"], after)


@pytest.mark.distributed
@pytest.mark.parametrize("pair", PAIRS, ids=lambda c: "p{}t{}->pg{}tg{}".format(*c))
def test_rollout_reports_the_transition(run: dict[str, Any], pair) -> None:
    p, t, pg, tg = pair
    dg = p * t // (pg * tg)
    for outcome in run["outcomes"]:
        stats, metrics = outcome[pair]["stats"], outcome[pair]["metrics"]
        assert {"timing/reshard_s", "perf/reshard_bytes"} <= set(metrics)
        assert (stats.bytes_received == 0) == (dg == 1)
        # Exactly the micro-DP gather's bytes (counted at the broadcasts vs the formula).
        formula = outcome[pair]["formula"]
        assert stats.bytes_received == formula.received
        assert (stats.generation_bytes, stats.training_bytes) == (
            formula.generation_shard,
            formula.training_shard,
        )
        assert stats.peak_extra_bytes <= stats.generation_bytes
