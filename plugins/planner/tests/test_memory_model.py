"""Per-device memory of roles under layouts, and group minimums."""

from __future__ import annotations

import math

import attrs
import pytest

from hfsdk_planner.layout import GenerationLayout, Layout
from hfsdk_planner.memory_model import (
    generation_bytes,
    min_group_devices,
    role_memory,
    sharded_footprint_bytes,
    training_state_bytes,
    weight_bytes,
)
from hfsdk_planner.model_spec import named_model
from hfsdk_planner.workload import RoleTask, Workload

SEVEN = named_model("7B")
P = SEVEN.num_params
W = Workload()


def _task(*kinds: str) -> RoleTask:
    return RoleTask(model=SEVEN, work=tuple(enumerate(kinds)), workload=W)


def test_training_state_is_mixed_precision_adam() -> None:
    # 2 (bf16 weights) + 2 (grads) + 12 (fp32 master, m, v) bytes per parameter.
    assert training_state_bytes(SEVEN, Layout(1, 1, 1)) == 16 * P
    # Weights and grads split over p * t; optimizer state also over d.
    assert training_state_bytes(SEVEN, Layout(2, 4, 1)) == 16 * P / 8
    assert training_state_bytes(SEVEN, Layout(1, 2, 4)) == 4 * P / 2 + 12 * P / 8


def test_inference_holds_only_weights() -> None:
    memory = role_memory(_task("inference"), Layout(1, 2, 4), None)
    assert memory.resident == weight_bytes(SEVEN, 2) == P
    # One layer's working set and fp32 logits of a micro-batch, split over t = 2.
    tokens = W.micro_batch_size * W.sequence_length
    expected = (tokens * SEVEN.hidden_size * 34 + tokens * SEVEN.vocab_size * 4) / 2
    assert memory.transient == expected


def test_generation_adds_gathered_weights_and_the_running_kv_cache() -> None:
    layout = Layout(2, 4, 1)  # training shard: 1/8 of the weights
    gen = GenerationLayout(tg=2, dg=4, running=16)
    kv = 16 * W.sequence_length * SEVEN.kv_bytes_per_token() / 2
    gathered = 2 * P / 2 - 2 * P / 8
    assert generation_bytes(SEVEN, layout, gen, W) == pytest.approx(gathered + kv)
    # When rollout and training shards coincide nothing is gathered.
    same = GenerationLayout(tg=8, dg=1, running=16)
    kv8 = 16 * W.sequence_length * SEVEN.kv_bytes_per_token() / 8
    assert generation_bytes(SEVEN, layout, same, W) == pytest.approx(kv8)


def test_actor_peak_is_resident_plus_larger_transient() -> None:
    actor = _task("generation", "inference", "training")
    layout = Layout(1, 4, 2)
    small = role_memory(actor, layout, GenerationLayout(4, 2, 8))
    big = role_memory(actor, layout, GenerationLayout(4, 2, 256))
    assert small.resident == big.resident == training_state_bytes(SEVEN, layout)
    assert big.transient > small.transient
    assert big.peak == big.resident + big.transient


def test_group_minimum_adds_footprints() -> None:
    actor = _task("generation", "training")
    reference = _task("inference")
    usable = 72e9
    assert sharded_footprint_bytes(reference) == 2 * P
    footprint = sharded_footprint_bytes(actor)
    assert footprint == 16 * P + 8 * W.sequence_length * SEVEN.kv_bytes_per_token()
    assert min_group_devices([actor, reference], usable) == math.ceil((footprint + 2 * P) / usable)
    assert min_group_devices([reference], 1e12) == 1


def test_inference_activations_use_the_forward_micro_batch() -> None:
    # Before: an inference pass was sized by micro_batch_size, so 16-row forward
    # micro-batches' fp32 logits went uncounted.
    one = attrs.evolve(W, micro_batch_size=1, forward_micro_batch_size=1)
    sixteen = attrs.evolve(one, forward_micro_batch_size=16)
    frozen = role_memory(RoleTask(model=SEVEN, work=((0, "inference"),), workload=one), L1, None)
    wide = role_memory(RoleTask(model=SEVEN, work=((0, "inference"),), workload=sixteen), L1, None)
    assert wide.transient == pytest.approx(16 * frozen.transient)
    logits = 16 * W.sequence_length * SEVEN.vocab_size * 4
    assert wide.transient > logits
    # A trained role's own inference pass (old log-probs) counts too, at its forward size.
    work = ((0, "inference"), (1, "training"))
    trained = role_memory(RoleTask(model=SEVEN, work=work, workload=sixteen), L1, None)
    assert trained.transient == pytest.approx(wide.transient)


L1 = Layout(1, 1, 1)
