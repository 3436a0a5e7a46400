"""Reward/cost models: the score head read at the last response token."""

from __future__ import annotations

from pathlib import Path

import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.scorer import ScoreEngine


def _batch(prompt: list[int], responses: list[list[int]], pad: int) -> Batch:
    width = max(len(r) for r in responses)
    rows = [r + [pad] * (width - len(r)) for r in responses]
    response_mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in responses])
    prompts = torch.tensor([prompt] * len(responses))
    attention = torch.cat([torch.ones_like(prompts), response_mask.long()], dim=1)
    return Batch.from_dict(
        tensors={
            "prompts": prompts,
            "responses": torch.tensor(rows),
            "input_ids": torch.cat([prompts, torch.tensor(rows)], dim=1),
            "attention_mask": attention,
            "response_mask": response_mask,
        }
    )


def test_scores_come_from_the_last_response_token(model_dir: Path) -> None:
    engine = ScoreEngine(
        FSDPRoleConfig(model_path=str(model_dir), micro_batch_size=2), role="reward"
    )
    assert engine.optimizer is None
    tokenizer = engine.tokenizer
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    prompt = tokenizer("3 + 5 =").input_ids
    answer = tokenizer.convert_tokens_to_ids("8")
    filler = tokenizer.convert_tokens_to_ids("ugh")
    batch = _batch(prompt, [[answer, eos], [filler, answer, eos], [answer]], pad)
    scores = engine.compute_scores(batch)["rm_scores"]
    assert scores.shape == (3,)
    # Each score equals the model scoring the unpadded sequence at its final token.
    for row, response in enumerate([[answer, eos], [filler, answer, eos], [answer]]):
        with torch.no_grad():
            alone = engine.module(input_ids=torch.tensor([prompt + response])).logits[0, 0]
        torch.testing.assert_close(scores[row], alone, atol=1e-5, rtol=1e-4)


def test_padding_with_the_eos_id_does_not_move_the_read_position(model_dir: Path) -> None:
    engine = ScoreEngine(FSDPRoleConfig(model_path=str(model_dir)), role="cost")
    tokenizer = engine.tokenizer
    eos = tokenizer.eos_token_id
    prompt = tokenizer("1 + 1 =").input_ids
    answer = tokenizer.convert_tokens_to_ids("2")
    with_pad = engine.compute_scores(
        _batch(prompt, [[answer, eos], [answer]], tokenizer.pad_token_id)
    )
    with_eos = engine.compute_scores(_batch(prompt, [[answer, eos], [answer]], eos), "cost_scores")
    torch.testing.assert_close(with_eos["cost_scores"], with_pad["rm_scores"])


def test_a_non_finite_score_is_refused(model_dir: Path) -> None:
    import pytest

    from hfsdk import HfsdkError

    engine = ScoreEngine(FSDPRoleConfig(model_path=str(model_dir)), role="reward")
    tokenizer = engine.tokenizer
    batch = _batch(tokenizer("1 + 1 =").input_ids, [[tokenizer.eos_token_id]] * 2, 0)
    with torch.no_grad():  # a diverged reward model: its head gives NaN
        engine.module.score.weight.fill_(float("nan"))
    # Before: the NaN became its whole group's advantage, and the update trained on it.
    with pytest.raises(HfsdkError, match=r"gave sample 0 the non-finite score nan"):
        engine.compute_scores(batch)
