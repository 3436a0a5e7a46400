"""Vocab-parallel log-probs and entropy equal the full-vocabulary ones (one rank, padding)."""

from __future__ import annotations

import torch

from hfsdk_backend_common.loss_terms import entropy_from_logits
from hfsdk_backend_megatron.vocab_parallel import vocab_parallel_log_probs


def test_padded_columns_get_no_probability() -> None:
    logits = torch.randn(3, 5, 11, dtype=torch.float64)
    targets = torch.randint(0, 11, (3, 5))
    padded = torch.cat([logits, torch.full((3, 5, 3), 50.0, dtype=torch.float64)], dim=-1)
    log_probs, entropy = vocab_parallel_log_probs(
        padded, targets, vocab_start=0, vocab_size=11, tp=1
    )
    expected = torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]
    assert torch.allclose(log_probs, expected.float(), atol=1e-6)
    assert torch.allclose(entropy, entropy_from_logits(logits).float(), atol=1e-6)
