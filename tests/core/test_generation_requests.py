"""``GenerationRequest.top_k`` / ``prompt_logprobs``: validated, refused by the one-row default."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest
import torch

from hfsdk import Batch, GenerationRequest, GenerationResult, HfsdkError, RolloutBackend


class _OneRow(RolloutBackend):
    """A backend without request-level generation: the contract's default serves requests."""

    def generate_sequences(self, prompts: Batch) -> Batch:
        ids = prompts["input_ids"]
        return Batch.from_dict(tensors={"responses": torch.full((len(ids), 2), 5)})


class _Actor:
    def __init__(self) -> None:
        self.tokenizer: Any = type("T", (), {"eos_token_id": 2})()
        self.generation_eos_ids: list[int] = []


def test_top_k_is_a_request_field_checked_on_construction() -> None:
    assert GenerationRequest(prompt_ids=[1], max_new_tokens=2).top_k == 0  # no cut
    assert GenerationRequest(prompt_ids=[1], max_new_tokens=2, top_k=5).top_k == 5
    with pytest.raises(ValueError, match="top_k"):
        GenerationRequest(prompt_ids=[1], max_new_tokens=2, top_k=-1)


def test_the_one_row_default_refuses_a_per_request_top_k() -> None:
    rollout = _OneRow(config=None, actor=_Actor())  # type: ignore[arg-type]
    plain = GenerationRequest(prompt_ids=[3, 4], max_new_tokens=2)
    assert asyncio.run(rollout.generate_request(plain)).token_ids == (5, 5)
    cut = GenerationRequest(prompt_ids=[3, 4], max_new_tokens=2, top_k=3)
    with pytest.raises(HfsdkError, match="cannot apply top_k=3 per request"):
        asyncio.run(rollout.generate_request(cut))
    greedy = GenerationRequest(prompt_ids=[3, 4], max_new_tokens=2, top_k=3, greedy=True)
    assert asyncio.run(rollout.generate_request(greedy)).token_ids == (5, 5)  # no draw to cut


def test_the_one_row_default_refuses_prompt_logprobs() -> None:
    rollout = _OneRow(config=None, actor=_Actor())  # type: ignore[arg-type]
    asked = GenerationRequest(prompt_ids=[3, 4], max_new_tokens=2, prompt_logprobs=True)
    with pytest.raises(HfsdkError, match="reports no prompt log-probs"):
        asyncio.run(rollout.generate_request(asked))
    assert asyncio.run(rollout.generate_request(attrs.evolve(asked, prompt_logprobs=False)))


def test_a_result_carries_prompt_logprobs_only_when_given() -> None:
    plain = GenerationResult(token_ids=[5], logprobs=[-0.5], finish_reason="length")
    assert plain.prompt_logprobs is None
    scored = GenerationResult(
        token_ids=[5], logprobs=[-0.5], finish_reason="stop", prompt_logprobs=[-1, -2]
    )
    assert scored.prompt_logprobs == (-1.0, -2.0)
