"""The default task's spec and its cache key."""

from __future__ import annotations

import pytest

from hfsdk_tasks import DefaultTaskSpec


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
    # hidden 12 over 4 heads: head size 3, which rotary position embeddings cannot split in halves
    with pytest.raises(ValueError, match=r"hidden_size=12 / num_heads=4 = 3.*even"):
        DefaultTaskSpec(hidden_size=12, num_heads=4)
    with pytest.raises(ValueError, match="p_correct"):
        DefaultTaskSpec(p_correct=1.0)
    assert DefaultTaskSpec().max_answer == 18


def test_the_default_model_splits_over_two_and_four_tensor_parallel_ranks() -> None:
    spec = DefaultTaskSpec()
    assert spec.num_heads % 2 == 0 and spec.num_heads % 4 == 0
    assert spec.hidden_size // spec.num_heads >= 32  # vLLM's CPU attention needs head_dim ≥ 32
    assert spec.intermediate_size % 4 == 0


@pytest.mark.parametrize("tp", [2, 4])
def test_the_default_task_validates_with_a_tensor_parallel_megatron_actor(tp: int) -> None:
    """A newcomer can train the default task at megatron tp=2/4 and reshard to rollout tp=1."""
    import hfsdk
    from hfsdk.core.config import load_run_config

    if "megatron" not in hfsdk.get_registry("training_backends"):
        pytest.skip("the megatron training backend is not installed")
    overrides = [
        "actor.backend=megatron",
        f"actor.parallel.tp={tp}",
        "actor.rollout_layout.tp=1",  # the 3D-HybridEngine regroups tp into micro-DP
        "reference.backend=megatron",
        f"reference.parallel.tp={tp}",
        f"placement.pools.global.devices={tp}",
    ]
    config = load_run_config("grpo", None, overrides)
    assert config.actor.parallel.tp == tp and config.actor.rollout_layout.tp == 1
