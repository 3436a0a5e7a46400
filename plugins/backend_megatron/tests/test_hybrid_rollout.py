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

from hfsdk_backend_common.testing.launch import run_gloo
from hfsdk_testing import hf_greedy_responses, save_tiny_llama

HERE = str(Path(__file__).parent)
PAIRS = [(1, 2, 1, 1), (2, 2, 1, 2), (1, 4, 1, 2), (2, 1, 1, 1), (2, 1, 2, 1), (2, 2, 2, 1)]
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]


def _save_model(directory: Path, tokenizer_dir: Path) -> Path:
    """A tiny Llama with 8 query / 4 key-value heads (t=4 divides both), peaked logits."""
    from transformers import PreTrainedTokenizerFast

    return save_tiny_llama(
        directory,
        PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir)),
        hidden_size=64,
        intermediate_size=64,
        num_heads=8,
        num_kv_heads=4,
        extra_vocab=1,  # odd: padded to a multiple of tp
        init_std=0.2,
    )


def _hf_greedy(model: Any, prompts: dict, width: int, eos: int, pad: int) -> torch.Tensor:
    ids, mask = prompts["input_ids"], prompts["attention_mask"]
    return hf_greedy_responses(model, ids, mask, width=width, eos=eos, pad=pad)


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
        # Exactly what each rank lacks: its generation shard minus its training shard.
        formula = outcome[pair]["formula"]
        assert stats.bytes_received == formula.received
        assert (stats.generation_bytes, stats.training_bytes) == (
            formula.generation_shard,
            formula.training_shard,
        )
        assert stats.peak_extra_bytes <= stats.generation_bytes
        # Lent training tensors: while decoding only the generation shard is held.
        assert stats.held_extra_bytes == stats.generation_bytes - stats.training_bytes
