"""Request-level generation through the rollout contract, with either actor.

The contract's default ``generate_request`` (``generate_sequences`` on one
row) serves a third party's rollout that knows nothing of requests
(``contract_rollout.py``, the doc's example) with the fsdp actor; the ``hf`` rollout's request
server serves a tp = 2 megatron actor (every rank in ``serving()``, the
weights gathered once). Both give transformers' greedy tokens per prompt.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import hfsdk
from hfsdk import GenerationRequest
from hfsdk.core.plugin_manager import get_plugin_manager

pytest.importorskip("hfsdk_backend_fsdp")
pytest.importorskip("hfsdk_backend_megatron")

HERE = str(Path(__file__).parent)
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]
WIDTH = 6
# The example registers itself as a plugin: each test starts from the installed ones.
pytestmark = pytest.mark.usefixtures("fresh_plugin_manager")


@pytest.fixture(scope="module")
def model(tp2_tiny_llama: tuple[Path, Any]) -> dict[str, Any]:
    """The tp-2 tiny Llama (peaked logits), its tokenizer and the prompts' token ids."""
    path, tokenizer = tp2_tiny_llama
    prompts = [tokenizer(text).input_ids for text in PROMPTS]
    return {"path": path, "tokenizer": tokenizer, "prompts": prompts}


def _reference(model: dict[str, Any]) -> list[list[int]]:
    """transformers' greedy tokens for each prompt alone, up to and including EOS."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(model["path"])).eval()
    tok = model["tokenizer"]
    out = []
    for ids in model["prompts"]:
        with torch.no_grad():
            tokens = hf.generate(input_ids=torch.tensor([ids]), max_new_tokens=WIDTH,
                                 do_sample=False, eos_token_id=tok.eos_token_id,
                                 pad_token_id=tok.pad_token_id)[0, len(ids) :].tolist()  # fmt: skip
        out.append(tokens)
    return out


def test_the_default_serves_requests_for_a_rollout_that_knows_none(model: dict[str, Any]) -> None:
    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import contract_rollout

    get_plugin_manager().pm.register(contract_rollout, name="sampling_contract_requests")
    actor = ActorEngine(FSDPRoleConfig(model_path=str(model["path"]), device="cpu"), role="actor")
    rollout = hfsdk.build_rollout(contract_rollout.SamplingConfig(max_response_length=WIDTH), actor)
    assert type(rollout).generate_request is hfsdk.RolloutBackend.generate_request

    async def serve() -> list[Any]:
        return await asyncio.gather(*(
            rollout.generate_request(GenerationRequest(prompt_ids=p, max_new_tokens=WIDTH,
                                                       greedy=True))
            for p in model["prompts"]
        ))  # fmt: skip

    with rollout.serving():
        results = asyncio.run(serve())
    assert [list(r.token_ids) for r in results] == _reference(model)


@pytest.mark.distributed
@pytest.mark.parametrize("tp", [1, pytest.param(2, marks=pytest.mark.heavy)])
def test_the_hf_request_server_works_with_a_megatron_actor(model: dict[str, Any], tp: int) -> None:
    """tp = 1: the decoder runs on the actor's tg = 1 generation shards; tp = 2: the
    generation layout is tensor-parallel, so every rank gathers a full copy to serve."""
    from hfsdk_backend_common.testing.launch import run_gloo

    kwargs = {"path": str(model["path"]), "prompts": model["prompts"], "width": WIDTH, "tp": tp}
    outcomes = run_gloo(tp, "request_rollout_worker:megatron_requests", kwargs, path=[HERE],
                        timeout=600)  # fmt: skip
    expected = _reference(model)
    assert len({tuple(e) for e in expected}) > 1  # the prompts decode differently
    for outcome in outcomes:  # every rank serves its own requests on the full weights
        assert outcome["tokens"] == expected
        assert outcome["peak_batch"] > 1
    assert outcomes[0]["tg"] == tp


@pytest.mark.heavy  # the megatron actor's case above runs the same server in the quick suite
@pytest.mark.distributed
def test_the_hf_request_server_works_with_a_sharded_fsdp_actor(model: dict[str, Any]) -> None:
    from hfsdk_backend_common.testing.launch import run_gloo

    prompts = [*model["prompts"], model["prompts"][0]]  # 5 prompts: rank 0 serves 3, rank 1 two
    kwargs = {"path": str(model["path"]), "prompts": prompts, "width": WIDTH}
    outcomes = run_gloo(2, "request_rollout_worker:fsdp_requests", kwargs, path=[HERE],
                        timeout=600)  # fmt: skip
    expected = [*_reference(model), _reference(model)[0]]
    assert [len(o["rows"]) for o in outcomes] == [3, 2]
    for outcome in outcomes:
        assert outcome["tokens"] == [expected[row] for row in outcome["rows"]]
