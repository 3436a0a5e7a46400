"""The vLLM rollout never trains what follows a completion's real end.

hfsdk rebuilds the response mask from its EOS ids (``assemble_rollout``), so the
engine must stop only on those ids: vLLM's own merge of the model's config.json
eos ids must not add stop tokens, and a completion that still ends early on an
id hfsdk does not know is refused rather than its padding trained. A single
request (``generate_request``) stops on hfsdk's EOS ids and its own stop ids
only. Runs on a fake engine (no model, no GPU).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from hfsdk import GenerationRequest, HfsdkError
from hfsdk_rollout_vllm.request_server import request_params
from hfsdk_rollout_vllm.requests import generate_rows, sampling_params

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

WIDTH = 6
PAD = 0
CONFIG = SimpleNamespace(
    max_response_length=WIDTH, micro_batch_size=0, temperature=1.0, top_p=1.0, top_k=0
)


class FakeEngine:
    """Answers every request with the same completion (log-prob -0.5 per token)."""

    def __init__(self, token_ids: list[int]) -> None:
        self.token_ids = token_ids
        self.params: list[Any] = []
        self.llm = SimpleNamespace(llm_engine=SimpleNamespace(get_num_unfinished_requests=int))

    def generate(self, requests: list[dict], params: list[Any]) -> list[Any]:
        self.params.extend(params)
        logprobs = [{t: SimpleNamespace(logprob=-0.5)} for t in self.token_ids]
        completion = SimpleNamespace(token_ids=self.token_ids, logprobs=logprobs)
        return [SimpleNamespace(outputs=[completion], prompt_token_ids=r["prompt_token_ids"])
                for r in requests]  # fmt: skip


def _rows(engine: FakeEngine, eos_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.tensor([[5, 6, 7]])
    return generate_rows(engine, CONFIG, eos_ids, PAD, ids, torch.ones_like(ids), [1], False)


@pytest.mark.parametrize("greedy", [True, False])
def test_the_engine_stops_only_on_hfsdks_eos_ids(greedy: bool) -> None:
    params = sampling_params(CONFIG, [2], greedy, seed=1)
    # What vLLM does with each request: merge the model's generation config (config.json
    # eos_token_id [2, 100] without a generation_config.json) and its tokenizer's EOS.
    params.update_from_generation_config({"eos_token_id": [2, 100]}, 2)
    assert list(params.stop_token_ids) == [2]


@pytest.mark.parametrize("greedy", [True, False])
def test_a_request_stops_only_on_hfsdks_eos_ids_and_its_own(greedy: bool) -> None:
    # The request path (multi-turn rollouts, hfsdk serve): serve's eos ids are the
    # tokenizer's only, so config.json's extra id 100 must not end a request early (it was
    # then reported as cut at its length).
    request = GenerationRequest(prompt_ids=[5], max_new_tokens=WIDTH, greedy=greedy,
                                stop_token_ids=[7])  # fmt: skip
    params = request_params(CONFIG, [2], request, seed=1)
    # vLLM's merge, as in the engine (no tokenizer loaded, so no primary eos id).
    params.update_from_generation_config({"eos_token_id": [2, 100]}, None)
    assert sorted(params.stop_token_ids) == [2, 7]


def test_an_early_end_on_an_unknown_id_is_refused() -> None:
    with pytest.raises(HfsdkError, match=r"token 100, which is not one of hfsdk's EOS ids \[2\]"):
        _rows(FakeEngine([100]), [2])


def test_an_end_on_eos_or_at_full_width_is_kept() -> None:
    from hfsdk.core.rollout_output import response_mask_from_eos

    responses, log_probs = _rows(FakeEngine([9, 2]), [2])
    assert responses[0].tolist() == [9, 2, PAD, PAD, PAD, PAD]
    assert response_mask_from_eos(responses, [2]).sum() == 2
    assert log_probs[0].tolist() == [-0.5, -0.5, 0, 0, 0, 0]
    responses, _ = _rows(FakeEngine([9, 100, 9, 9, 9, 9]), [2])
    assert response_mask_from_eos(responses, [2]).sum() == WIDTH
