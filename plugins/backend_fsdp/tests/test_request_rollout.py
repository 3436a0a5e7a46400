"""The ``hf`` rollout serves single requests (``generate_request``) on an fsdp actor.

Greedy requests in flight together get what ``generate_sequences`` and
transformers' ``generate`` give on the same prompts, for an untied float32
model, a tied one and bfloat16; the server holds the weights until they
change; a model the hfsdk decoder does not decode is served by the
contract's default (``generate_sequences`` on one row).
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import Batch, GenerationRequest, GenerationResult, load_tokenizer
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_testing import save_tiny_llama

PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 =", "7 + 1 + 1 ="]
WIDTH = 8


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> dict[str, Path]:
    """Tiny Llamas with peaked logits (no near-ties in greedy decoding): untied and tied."""
    tokenizer = load_tokenizer(model_dir)
    root = tmp_path_factory.mktemp("requests")
    common = {"hidden_size": 64, "intermediate_size": 64, "num_heads": 2, "num_kv_heads": 2,
              "init_std": 0.2}  # fmt: skip
    return {
        "untied": save_tiny_llama(root / "untied", tokenizer, **common),
        "tied": save_tiny_llama(root / "tied", tokenizer, tied=True, **common),
    }


def _rollout(path: Path, dtype: str = "float32", decoder: str = "auto") -> HFRollout:
    actor = ActorEngine(
        FSDPRoleConfig(model_path=str(path), device="cpu", dtype=dtype),  # type: ignore[arg-type]
        role="actor",
    )
    config = HFRolloutConfig(max_response_length=WIDTH, decoder=decoder)  # type: ignore[arg-type]
    return HFRollout(config, actor)


def _prompt_ids(rollout: HFRollout) -> list[list[int]]:
    return [rollout.tokenizer(text).input_ids for text in PROMPTS]


def _batch_greedy(rollout: HFRollout, prompts: list[list[int]]) -> list[list[int]]:
    """``generate_sequences``' greedy responses (valid tokens only), one prompt per call."""
    out = []
    for ids in prompts:
        tensor = torch.tensor([ids])
        batch = Batch.from_dict(tensors={"input_ids": tensor,
                                         "attention_mask": torch.ones_like(tensor)})  # fmt: skip
        result = rollout.generate_sequences(batch, greedy=True)
        out.append(result["responses"][0][result["response_mask"][0].bool()].tolist())
    return out


def _requests(rollout: HFRollout, prompts: list[list[int]], **kw: Any) -> list[GenerationResult]:
    async def main() -> list[GenerationResult]:
        async def one(i: int, ids: list[int]) -> GenerationResult:
            await asyncio.sleep(0.002 * i)  # staggered: each joins a running batch
            return await rollout.generate_request(
                GenerationRequest(prompt_ids=ids, max_new_tokens=WIDTH, greedy=True, **kw)
            )

        return await asyncio.gather(*(one(i, ids) for i, ids in enumerate(prompts)))

    return asyncio.run(main())


@pytest.mark.parametrize(("model", "dtype"),
                         [("untied", "float32"), ("tied", "float32"), ("tied", "bfloat16")])  # fmt: skip
def test_greedy_requests_equal_generate_sequences(
    models: dict[str, Path], model: str, dtype: str
) -> None:
    from transformers import AutoModelForCausalLM

    rollout = _rollout(models[model], dtype)
    prompts = _prompt_ids(rollout)
    expected = _batch_greedy(rollout, prompts)
    assert len({tuple(e) for e in expected}) >= 3
    with rollout.serving():
        results = _requests(rollout, prompts)
        assert rollout.request_server is not None
        assert rollout.request_server.stats.peak_batch > 1
    assert rollout.request_server is None  # the weights are dropped after serving
    assert [list(r.token_ids) for r in results] == expected
    if dtype == "float32":  # and transformers' generate, request by request
        hf = AutoModelForCausalLM.from_pretrained(str(models[model])).eval()
        eos = rollout.tokenizer.eos_token_id
        for ids, result in zip(prompts, results, strict=True):
            with torch.no_grad():
                out = hf.generate(input_ids=torch.tensor([ids]), max_new_tokens=WIDTH,
                                  do_sample=False, eos_token_id=eos,
                                  pad_token_id=rollout.tokenizer.pad_token_id)  # fmt: skip
            assert list(result.token_ids) == out[0, len(ids) :].tolist()
            assert result.finish_reason == ("stop" if result.token_ids[-1] == eos else "length")
            # Raw log-probs of a teacher-forced forward.
            full = torch.tensor([[*ids, *result.token_ids]])
            with torch.no_grad():
                logp = hf(input_ids=full).logits[0, len(ids) - 1 : -1].log_softmax(-1)
            want = logp.gather(-1, torch.tensor(result.token_ids)[:, None])[:, 0]
            torch.testing.assert_close(torch.tensor(result.logprobs), want, atol=1e-4, rtol=1e-4)


def test_the_server_serves_the_new_weights_after_an_update(models: dict[str, Path]) -> None:
    rollout = _rollout(models["untied"])
    prompts = _prompt_ids(rollout)
    before = [r.token_ids for r in _requests(rollout, prompts)]  # opened lazily: one process
    assert rollout.request_server is not None
    with torch.no_grad():
        for param in rollout.actor.module.parameters():
            param.mul_(-1.0)
    rollout.update_weights(rollout.actor)
    assert rollout.request_server is None
    after = [list(r.token_ids) for r in _requests(rollout, prompts)]
    assert after != [list(b) for b in before]  # fails if stale weights served
    assert after == _batch_greedy(rollout, prompts)
    rollout.close()


def test_the_contract_default_serves_models_without_the_hfsdk_decoder(
    models: dict[str, Path],
) -> None:
    rollout = _rollout(models["untied"], decoder="transformers")
    prompts = _prompt_ids(rollout)
    results = _requests(rollout, prompts)
    assert rollout.request_server is None  # no server: generate_sequences per request
    assert [list(r.token_ids) for r in results] == _batch_greedy(rollout, prompts)
    assert all(math.isnan(lp) for r in results for lp in r.logprobs)
    # stop tokens and max_new_tokens cut the one-row response
    tokens = list(results[0].token_ids)
    short = _requests(rollout, prompts[:1], stop_token_ids=[tokens[1]])[0]
    assert list(short.token_ids) == tokens[:2] and short.finish_reason == "stop"
