"""The memory model's levers: LoRA, activation recompute, packing; the preflight warning."""

from __future__ import annotations

import pytest

from hfsdk.core.config import load_run_config
from hfsdk_planner.layout import Layout
from hfsdk_planner.memory_check import run_memory_warning
from hfsdk_planner.memory_model import (
    lora_params,
    role_memory,
    training_activation_bytes,
    training_state_bytes,
)
from hfsdk_planner.model_spec import ModelSpec
from hfsdk_planner.run_memory import memory_warning, run_memory
from hfsdk_planner.run_plan import run_setup
from hfsdk_planner.workload import RoleTask, Workload

QWEN_05B = ModelSpec.from_shape(
    name="qwen2.5-0.5b",
    num_layers=24,
    hidden_size=896,
    num_heads=14,
    num_kv_heads=2,
    intermediate_size=4864,
    vocab_size=151936,
    tie_word_embeddings=True,
)
"""Qwen2.5-0.5B's shape."""


def test_lora_params_count_every_linear_layer_of_the_blocks() -> None:
    # What peft reports for Qwen2.5-0.5B, r=16 on q,k,v,o,gate,up,down: 8,798,208.
    assert lora_params(QWEN_05B, 16) == 8_798_208


def test_lora_state_is_a_frozen_fp32_base_plus_trained_adapters() -> None:
    p, a = QWEN_05B.num_params, lora_params(QWEN_05B, 16)
    assert training_state_bytes(QWEN_05B, Layout(1, 1, 1), 16) == 4 * p + 16 * a
    assert training_state_bytes(QWEN_05B, Layout(1, 1, 1)) == 16 * p
    policy = RoleTask(
        model=QWEN_05B, work=((0, "generation"), (1, "training")), workload=Workload(lora_rank=16)
    )
    critic = RoleTask(model=QWEN_05B, work=((1, "training"),), workload=Workload(lora_rank=16))
    # Only the policy (it generates and trains) has adapters.
    assert role_memory(policy, Layout(1, 1, 1), None).resident == 4 * p + 16 * a
    assert role_memory(critic, Layout(1, 1, 1), None).resident == 16 * p


def test_recompute_keeps_layer_inputs_and_packing_counts_real_tokens() -> None:
    base = Workload(micro_batch_size=4, prompt_length=256, response_length=256, dtype_bytes=4)
    full = training_activation_bytes(QWEN_05B, Layout(1, 1, 1), attrs_evolve(base, False))
    ckpt = training_activation_bytes(QWEN_05B, Layout(1, 1, 1), attrs_evolve(base, True))
    tokens, h = 4 * 512, QWEN_05B.hidden_size
    logits = tokens * QWEN_05B.vocab_size * 4
    assert full == pytest.approx(tokens * h * 68 * 24 + logits)
    assert ckpt == pytest.approx(tokens * h * 4 * 24 + tokens * h * 68 + logits)
    packed = attrs_evolve(base, True, packing=True, mean_sequence_length=256)
    half = training_activation_bytes(QWEN_05B, Layout(1, 1, 1), packed)
    assert half == pytest.approx(ckpt / 2)
    # Without a known mean length packing promises nothing.
    unknown = attrs_evolve(base, True, packing=True)
    assert training_activation_bytes(QWEN_05B, Layout(1, 1, 1), unknown) == ckpt


def attrs_evolve(workload: Workload, recompute: bool, **changes: object) -> Workload:
    import attrs

    return attrs.evolve(workload, recompute=recompute, **changes)


def test_run_estimate_applies_each_roles_levers() -> None:
    plain = {
        r.role: r.memory for p in run_memory(load_run_config("grpo", None, [])) for r in p.roles
    }
    lora = load_run_config("grpo", None, ["actor.lora.rank=8", "actor.gradient_checkpointing=true"])
    levers = {r.role: r.memory for p in run_memory(lora) for r in p.roles}
    assert levers["actor"].resident < plain["actor"].resident / 2
    assert levers["actor"].transient < plain["actor"].transient
    # The reference is the LoRA actor's base: no weights of its own.
    assert levers["reference"].resident == 0 < plain["reference"].resident


def test_preflight_warns_with_the_role_and_its_estimate() -> None:
    config = load_run_config("grpo", None, [])
    total = sum(p.total for p in run_memory(config))
    assert run_memory_warning(config, host_bytes=2 * total) is None
    warning = run_memory_warning(config, host_bytes=total / 2)
    assert warning is not None and "\n" not in warning
    assert warning.startswith("pool 'global' needs ~")
    assert "actor ~" in warning and "reference ~" in warning
    assert "the largest is actor: try actor.gradient_checkpointing" in warning
    # On GPUs the comparison is per device.
    pools = run_memory(config)
    assert memory_warning(pools, device_bytes=pools[0].per_device * 0.9, host_bytes=None)
    assert memory_warning(pools, device_bytes=pools[0].per_device * 1.1, host_bytes=None) is None


def test_a_reward_model_run_is_estimated_without_a_policy() -> None:
    # A reward-model trainer has no policy role; its score model is the run's main role.
    pools = run_memory(load_run_config("reward_model"))
    assert [r.role for pool in pools for r in pool.roles] == ["reward_model"]
    assert pools[0].roles[0].memory.peak > 0


def test_a_megatron_role_holds_its_model_parallel_shard_on_every_replica() -> None:
    # FSDP shards the state over all its ranks; megatron only over tp x pp (its
    # data-parallel replicas each hold the shard's weights, gradients and Adam state).
    def actor(*overrides: str) -> float:
        config = load_run_config(
            "grpo",
            None,
            [*overrides, "placement.pools.global.devices=4", "reference.backend=fsdp"],
        )
        (pool,) = run_memory(config)
        return next(r.memory.resident for r in pool.roles if r.role == "actor")

    fsdp = actor("actor.backend=fsdp")
    assert actor("actor.backend=megatron") == pytest.approx(4 * fsdp)
    assert actor("actor.backend=megatron", "actor.parallel.tp=4") == pytest.approx(fsdp)


def test_cpu_only_pools_that_overflow_the_host_together_are_warned() -> None:
    # Before: each pool was compared with the host alone, so two pools that each fit
    # but together did not got no warning (the host holds every pool's devices).
    config = load_run_config(
        "grpo",
        None,
        [
            "placement.pools.actor_pool.devices=1",
            "placement.pools.ref_pool.devices=1",
            "placement.roles.actor=actor_pool",
            "placement.roles.reference=ref_pool",
        ],
    )
    pools = run_memory(config)
    largest = max(p.total for p in pools)
    together = sum(p.total for p in pools)
    warning = memory_warning(pools, device_bytes=None, host_bytes=largest * 1.05)
    assert warning is not None and "\n" not in warning
    assert warning.startswith("the run's 2 pools need ~")
    assert "pool 'actor_pool' ~" in warning and "pool 'ref_pool' ~" in warning
    assert "the largest is pool 'actor_pool'" in warning
    assert "try actor.gradient_checkpointing" in warning
    assert memory_warning(pools, device_bytes=None, host_bytes=together * 1.01) is None


def test_each_role_is_sized_by_its_own_forward_micro_batch() -> None:
    # Before: every role's inference activations used the actor's micro_batch_size.
    def transients(*overrides: str) -> dict[str, float]:
        config = load_run_config("grpo", None, ["actor.micro_batch_size=1", *overrides])
        return {r.role: r.memory.transient for p in run_memory(config) for r in p.roles}

    small = transients("reference.forward_micro_batch_size=1")
    wide = transients("reference.forward_micro_batch_size=16")
    assert wide["reference"] > 8 * small["reference"]
    assert wide["actor"] == small["actor"]
    actor_wide = transients(
        "reference.forward_micro_batch_size=1", "actor.forward_micro_batch_size=16"
    )
    assert actor_wide["actor"] > small["actor"]
    assert actor_wide["reference"] == small["reference"]


# An actor whose peak is its generation: small activations, a 1.5B model.
GENERATION_BOUND = [
    "actor.model_path=1.5B",
    "actor.gradient_checkpointing=true",
    "actor.micro_batch_size=1",
    "actor.forward_micro_batch_size=1",
]


def test_a_sharded_fsdp_actor_gathers_a_full_weight_copy_to_generate() -> None:
    # Before: an fsdp actor sharded over 8 devices generated on 1/8 of its weights.
    def actor(*overrides: str) -> tuple[float, float]:
        config = load_run_config(
            "grpo", None, [*GENERATION_BOUND, "placement.pools.global.devices=8", *overrides]
        )
        setup = run_setup(config)
        (pool,) = run_memory(config)
        memory = next(r.memory for r in pool.roles if r.role == "actor")
        full = setup.workload_for("actor").dtype_bytes * setup.models["actor"].num_params
        return memory.transient, full

    transient, full = actor()
    assert transient >= full
    split, full = actor("actor.rollout_layout.tp=2")
    assert full / 2 <= split < transient
