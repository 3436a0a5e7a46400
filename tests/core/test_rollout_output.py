"""The rollout contract's output batch (``hfsdk.assemble_rollout`` and its helpers)."""

from __future__ import annotations

import pytest
import torch

import hfsdk
from hfsdk import Batch, HfsdkError


class _Tokenizer:
    """Token ids as text: enough of a tokenizer for ``response_text``."""

    pad_token_id = 0
    eos_token_id = 2

    def batch_decode(self, rows: list[list[int]], skip_special_tokens: bool) -> list[str]:
        return [" ".join(str(t) for t in row if t != 2 or not skip_special_tokens) for row in rows]


def test_response_mask_covers_up_to_and_including_the_first_eos() -> None:
    responses = torch.tensor([[5, 2, 7, 2], [5, 6, 7, 8], [2, 0, 0, 0]])
    mask = hfsdk.response_mask_from_eos(responses, [2])
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert hfsdk.response_mask_from_eos(torch.tensor([[5, 9, 3]]), [2, 9]).tolist() == [[1, 1, 0]]


def test_position_ids_skip_left_padding() -> None:
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]])
    assert hfsdk.position_ids_from_mask(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 3]]


def test_eos_ids_join_the_generation_config_and_the_tokenizer() -> None:
    assert hfsdk.eos_token_ids([7, 2], _Tokenizer()) == [2, 7]
    assert hfsdk.eos_token_ids(5, _Tokenizer()) == [2, 5]


def test_assemble_rollout_builds_the_contract_batch() -> None:
    prompts = Batch.from_dict(
        tensors={"input_ids": torch.tensor([[0, 4], [0, 4], [3, 4]]),
                 "attention_mask": torch.tensor([[0, 1], [0, 1], [1, 1]])},
        non_tensors={"uid": ["a", "a", "b"]},
        meta={"n": 2},
    )  # fmt: skip
    responses = torch.tensor([[5, 2, 9], [6, 7, 8], [2, 9, 9]])
    logps = torch.full((3, 3), -1.0)
    out = hfsdk.assemble_rollout(
        prompts, responses, tokenizer=_Tokenizer(), eos_ids=[2], temperature=0.7, greedy=False,
        metrics={"timing/generate_s": 1.5}, extra={"rollout_log_probs": logps},
    )  # fmt: skip
    assert out["responses"].tolist() == [[5, 2, 0], [6, 7, 8], [2, 0, 0]]
    assert out["response_mask"].tolist() == [[1, 1, 0], [1, 1, 1], [1, 0, 0]]
    assert out["input_ids"].tolist() == [[0, 4, 5, 2, 0], [0, 4, 6, 7, 8], [3, 4, 2, 0, 0]]
    assert out["attention_mask"].tolist() == [[0, 1, 1, 1, 0], [0, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert out["position_ids"].tolist() == [[0, 0, 1, 2, 2], [0, 0, 1, 2, 3], [0, 1, 2, 2, 2]]
    assert out["rollout_log_probs"].tolist() == [[-1, -1, 0], [-1, -1, -1], [-1, 0, 0]]
    assert list(out["uid"]) == ["a", "a", "b"]
    assert list(out["response_text"]) == ["5", "6 7 8", ""]
    assert out.meta == {"n": 2, "temperature": 0.7, "greedy": False,
                        "rollout_metrics": {"timing/generate_s": 1.5}}  # fmt: skip


def test_assemble_rollout_refuses_unrepeated_prompts() -> None:
    prompts = Batch.from_dict(
        tensors={"input_ids": torch.tensor([[3, 4]]), "attention_mask": torch.ones(1, 2)}
    )
    with pytest.raises(HfsdkError, match=r"2 responses for 1 prompt rows; repeat each prompt"):
        hfsdk.assemble_rollout(
            prompts, torch.zeros(2, 3, dtype=torch.long), tokenizer=_Tokenizer(), eos_ids=[2],
            temperature=1.0, greedy=False,
        )  # fmt: skip


def _output(rows: int, metrics: object, **meta: object) -> Batch:
    return Batch.from_dict(
        tensors={"x": torch.arange(rows)}, meta={"rollout_metrics": metrics, **meta}
    )


def test_merged_rollout_metrics_are_row_weighted_means() -> None:
    merged = hfsdk.merge_rollout_metrics(
        [_output(1, {"a": 4.0, "b": 1.0}), _output(3, {"a": 0.0}), _output(2, {})]
    )
    expected = {"a": 1.0, "b": 1.0}  # a: (4*1 + 0*3) / 4; b: only the first reports it
    assert [b.meta["rollout_metrics"] for b in merged] == [expected] * 3
    assert Batch.concat(merged).meta["rollout_metrics"] == expected


def test_equal_or_absent_rollout_metrics_are_left_alone() -> None:
    same = [_output(1, {"a": 1.0}), _output(2, {"a": 1.0})]
    assert all(x is y for x, y in zip(hfsdk.merge_rollout_metrics(same), same, strict=True))
    plain = [Batch.from_dict(tensors={"x": torch.arange(2)})]
    assert hfsdk.merge_rollout_metrics(plain)[0] is plain[0]


def test_rollout_metrics_that_are_not_numbers_are_refused() -> None:
    with pytest.raises(HfsdkError, match=r"\['a'\] is 'fast'; a rollout's metrics must be numbers"):
        hfsdk.merge_rollout_metrics([_output(1, {"a": "fast"}), _output(1, {"a": 1.0})])
    with pytest.raises(HfsdkError, match=r"is a list; a rollout reports its metrics as a dict"):
        hfsdk.merge_rollout_metrics([_output(1, [1.0]), _output(1, {"a": 1.0})])
