"""The decoder's and the request server's top-k and nucleus cuts."""

from __future__ import annotations

import torch

from hfsdk_backend_common.hybrid.decoder import nucleus_filter, top_k_filter


def test_a_top_k_at_or_past_the_vocabulary_cuts_nothing() -> None:
    """rollout.top_k=50 on the default task's 26-token vocabulary raised in ``topk``; as in
    transformers and vLLM it is no cut."""
    logits = torch.randn(3, 26)
    for k in (0, 26, 50):
        assert torch.equal(top_k_filter(logits, k), logits)


def test_top_k_keeps_the_k_largest() -> None:
    logits = torch.tensor([[1.0, 4.0, 2.0, 3.0]])
    kept = top_k_filter(logits, 2)
    assert torch.isfinite(kept).tolist() == [[False, True, False, True]]


def test_the_nucleus_keeps_the_smallest_set_over_top_p() -> None:
    logits = torch.tensor([[0.5, 0.3, 0.2]]).log()
    assert torch.isfinite(nucleus_filter(logits, 0.6)).tolist() == [[True, True, False]]
    assert torch.equal(nucleus_filter(logits, 1.0), logits)
