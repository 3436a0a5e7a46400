"""Per-token log-probs, entropy and slicing of the response part."""

from __future__ import annotations

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.token_ops import (
    last_token_index,
    response_log_probs,
    response_slice,
)


def test_response_slice_is_the_outputs_that_predict_the_response() -> None:
    outputs = torch.arange(7).repeat(2, 1)  # prompt 4 tokens (0..3), response 3 tokens (4..6)
    # Output 3 predicts token 4, output 5 predicts token 6.
    assert response_slice(outputs, 3).tolist() == [[3, 4, 5], [3, 4, 5]]
    with pytest.raises(HfsdkError, match="does not fit"):
        response_slice(outputs, 7)


def test_log_probs_and_entropy_match_a_direct_computation() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 11)
    responses = torch.tensor([[1, 2, 3], [4, 5, 10]])
    log_probs, entropy = response_log_probs(logits, responses, temperature=0.7)
    scaled = logits[:, 2:5] / 0.7
    expected = torch.log_softmax(scaled, dim=-1).gather(-1, responses[..., None])[..., 0]
    torch.testing.assert_close(log_probs, expected)
    probs = torch.softmax(scaled, dim=-1)
    torch.testing.assert_close(entropy, -(probs * probs.log()).sum(-1))
    _, none = response_log_probs(logits, responses, with_entropy=False)
    assert none is None


def test_last_token_index_points_at_the_last_valid_response_token() -> None:
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert last_token_index(mask, prompt_length=4).tolist() == [5, 6, 4]
    holes = torch.tensor([[1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0]])  # tool tokens at 2, 3
    assert last_token_index(holes, prompt_length=4).tolist() == [8, 4]
