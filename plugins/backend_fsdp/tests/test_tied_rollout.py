"""A tied-embedding model generates what transformers does, at dp 1 and 2, float32 and bfloat16.

The ``hf`` rollout builds its generation module without weights and fills
it from ``actor.hf_weights()``, which names a tied weight once (the
embedding). Materialising with ``to_empty`` gave the output layer its own,
never-written storage (garbage tokens); the module must keep the tie. The
same two ranks also check that a weight reload failing on one rank fails
on both at once (one message each, no hang).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import load_tokenizer
from hfsdk_backend_common.testing.launch import run_gloo
from hfsdk_testing import hf_greedy_responses, save_tiny_llama

HERE = str(Path(__file__).parent)
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]
WIDTH = 8
CASES = [("float32", "transformers"), ("float32", "hfsdk"), ("bfloat16", "transformers")]


@pytest.fixture(scope="module")
def tied(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> dict[str, Any]:
    """A tied tiny Llama (peaked logits: no near-ties in greedy decoding) and prompts."""
    tokenizer = load_tokenizer(model_dir)
    path = save_tiny_llama(
        tmp_path_factory.mktemp("tied") / "model",
        tokenizer,
        hidden_size=64,
        intermediate_size=64,
        num_heads=2,
        num_kv_heads=2,
        tied=True,
        init_std=0.2,
    )
    tokenizer.padding_side = "left"
    encoded = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    prompts = {"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
    return {"path": path, "prompts": prompts, "tokenizer": tokenizer}


def _worker() -> Any:
    """The rank-side module (also what the spawned ranks import)."""
    import importlib
    import sys

    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    return importlib.import_module("tied_rollout_worker")


def _reference(tied: dict[str, Any], dtype: str) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    # The fsdp actor trains bfloat16 on CPU with eager attention (attn_implementation: auto)
    # and the generation module follows the actor's config: compare like with like.
    attention = "eager" if dtype == "bfloat16" else "sdpa"
    model = AutoModelForCausalLM.from_pretrained(
        str(tied["path"]), dtype=getattr(torch, dtype), attn_implementation=attention
    )
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    tok = tied["tokenizer"]
    ids, mask = tied["prompts"]["input_ids"], tied["prompts"]["attention_mask"]
    return hf_greedy_responses(
        model.eval(), ids, mask, width=WIDTH, eos=tok.eos_token_id, pad=tok.pad_token_id
    )


@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_one_rank_generates_what_transformers_does(tied: dict[str, Any], case) -> None:
    dtype, decoder = case
    ours = _worker().greedy(str(tied["path"]), tied["prompts"], dtype, decoder, WIDTH)
    assert torch.equal(ours, _reference(tied, dtype))


@pytest.fixture(scope="module")
def two_ranks(tied: dict[str, Any]) -> list[dict]:
    kwargs = {"path": str(tied["path"]), "prompts": tied["prompts"], "cases": CASES, "width": WIDTH}
    return run_gloo(2, "tied_rollout_worker:run", kwargs, path=[HERE], timeout=600)


@pytest.mark.distributed
@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_two_ranks_generate_what_transformers_does(
    tied: dict[str, Any], two_ranks: list[dict], case
) -> None:
    ours = torch.cat([rank[case] for rank in two_ranks])
    assert torch.equal(ours, _reference(tied, case[0]))


@pytest.mark.distributed
def test_a_reload_failing_on_one_rank_fails_both_at_once(tied: dict[str, Any]) -> None:
    outcomes = run_gloo(
        2, "tied_rollout_worker:failing_reload", {"path": str(tied["path"])}, path=[HERE],
        timeout=120,
    )  # fmt: skip
    failed, other = outcomes[1]["error"], outcomes[0]["error"]
    assert failed is not None and "injected: the engine rejected a weight" in failed
    assert "\n" not in failed
    assert other is not None and "failed on another rank" in other and "\n" not in other
    assert [o["probe"] for o in outcomes] == [2.0, 2.0]  # both ranks still in step
