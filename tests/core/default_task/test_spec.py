"""The default task's spec and its cache key."""

from __future__ import annotations

import pytest

from hfsdk.core.default_task import DefaultTaskSpec


def test_cache_key_follows_every_field_and_the_extra_versions() -> None:
    base = DefaultTaskSpec()
    assert base.cache_key() == DefaultTaskSpec().cache_key()
    assert base.cache_key() != DefaultTaskSpec(p_correct=0.25).cache_key()
    assert base.cache_key() != DefaultTaskSpec(seed=1).cache_key()
    assert base.cache_key({"torch": "1"}) != base.cache_key({"torch": "2"})
    assert len(base.cache_key()) == 16


def test_invalid_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        DefaultTaskSpec(hidden_size=100, num_heads=3)
    with pytest.raises(ValueError, match="p_correct"):
        DefaultTaskSpec(p_correct=1.0)
    assert DefaultTaskSpec().max_answer == 18
