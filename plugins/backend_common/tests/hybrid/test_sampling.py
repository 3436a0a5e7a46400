"""The decoder's building blocks: inverse-CDF sampling and the preallocated KV cache."""

from __future__ import annotations

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.hybrid.decoder import KVCache, sample_rows


def test_sample_rows_draws_with_the_given_probabilities() -> None:
    probs = torch.tensor([[0.5, 0.0, 0.3, 0.2], [0.0, 0.0, 0.0, 1.0]])
    generator = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_rows(probs, generator) for _ in range(20000)])
    freq = torch.bincount(draws[:, 0], minlength=4).float() / len(draws)
    # 20,000 draws: the standard error of each frequency is below 0.004.
    torch.testing.assert_close(freq, probs[0], atol=0.015, rtol=0)
    assert (draws[:, 1] == 3).all()  # a certain token is always drawn
    assert (draws[:, 0] != 1).all()  # an impossible one never


def test_sample_rows_is_reproducible_from_the_generator_and_unnormalised_is_fine() -> None:
    weights = torch.tensor([[2.0, 6.0, 2.0]] * 64)
    first = sample_rows(weights, torch.Generator().manual_seed(3))
    again = sample_rows(weights, torch.Generator().manual_seed(3))
    assert torch.equal(first, again)
    assert set(first.tolist()) <= {0, 1, 2} and (first == 1).sum() > 20


def test_kv_cache_writes_in_place_and_refuses_to_overflow() -> None:
    cache = KVCache(capacity=5)
    k = torch.arange(2 * 1 * 3 * 2, dtype=torch.float32).view(2, 1, 3, 2)
    keys, values = cache.extend(0, k, -k)
    assert keys.shape == (2, 1, 3, 2) and torch.equal(keys, k) and torch.equal(values, -k)
    cache.advance(3)
    step = torch.full((2, 1, 1, 2), 7.0)
    keys, _ = cache.extend(0, step, step)
    assert keys.shape == (2, 1, 4, 2)
    assert torch.equal(keys[:, :, :3], k) and torch.equal(keys[:, :, 3:], step)
    cache.advance(1)
    with pytest.raises(HfsdkError, match="KV cache holds 5 positions but 6"):
        cache.extend(0, torch.zeros(2, 1, 2, 2), torch.zeros(2, 1, 2, 2))
