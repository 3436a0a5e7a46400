"""The planner's count of a model's work, checked by hand on a tiny Llama shape."""

from __future__ import annotations

import pytest

from hfsdk_planner.flops import (
    decode_step_bytes,
    forward_flops,
    generation_bytes,
    generation_flops,
    training_flops,
)
from hfsdk_planner.model_spec import ModelSpec

# 2 layers, hidden 8, 2 heads of 4 (2 KV heads), MLP 16, vocabulary 10, untied embeddings.
# Per layer: q, k, v, o = 4 x 8 x 8 = 256; gate, up, down = 3 x 8 x 16 = 384; two norms 16
# -> 656; two layers 1312; embeddings and LM head 2 x 10 x 8 = 160; final norm 8: 1480.
TINY = ModelSpec.from_shape(
    name="tiny",
    num_layers=2,
    hidden_size=8,
    num_heads=2,
    num_kv_heads=2,
    intermediate_size=16,
    vocab_size=10,
)
P = 1480
# K and V of one token over both layers: 2 x 2 layers x 2 heads x 4 wide x 2 bytes = 64.
KV_PER_TOKEN = 64


def test_the_tiny_model_has_the_hand_counted_parameters() -> None:
    assert TINY.num_params == P
    assert TINY.kv_bytes_per_token() == KV_PER_TOKEN


def test_passes_cost_two_flops_per_parameter_and_token_forward_six_training() -> None:
    assert forward_flops(TINY, 15) == 2 * 1480 * 15 == 44_400
    assert training_flops(TINY, 15) == 6 * 1480 * 15 == 133_200
    assert training_flops(TINY, 15, recompute=True) == 8 * 1480 * 15 == 177_600


def test_a_decode_step_reads_the_weights_once_and_every_sequence_s_cache() -> None:
    # fp32 weights 4 x 1480 = 5920 bytes; 3 sequences of 5 cached tokens: 3 x 5 x 64 = 960.
    assert decode_step_bytes(TINY, running=3, context=5, weight_bytes=4) == 6_880
    # Two tensor-parallel devices: half the weights, the KV heads split too.
    assert decode_step_bytes(TINY, running=3, context=5, weight_bytes=4, tg=2) == 2_960 + 480


def test_generation_prefills_the_prompts_then_decodes_each_step() -> None:
    # 3 sequences x (5 prompt + 4 generated) tokens x 2 x 1480.
    assert generation_flops(TINY, sequences=3, prompt=5, steps=4) == 79_920
    # Mean context 5 + 4 / 2 = 7: each of 4 steps reads 5920 + 3 x 7 x 64 = 7264 bytes.
    assert generation_bytes(TINY, 3, 5, 4, weight_bytes=4) == 4 * 7_264
    # Two at a time: a wave of 2 and one of 1 each read the weights: (5920 + 896) + (5920 + 448).
    assert generation_bytes(TINY, 3, 5, 4, running=2, weight_bytes=4) == 4 * 13_184


def test_the_simulator_prices_the_same_count() -> None:
    import attrs

    from hfsdk_planner.cluster import local
    from hfsdk_planner.layout import Layout
    from hfsdk_planner.simulator import Simulator, SimulatorSettings
    from hfsdk_planner.workload import Workload

    cluster = attrs.evolve(local(), peak_flops=1e9, layer_overhead=0.0).with_devices(1)
    settings = SimulatorSettings(inference_efficiency=0.5)
    workload = Workload(batch_size=3, prompt_length=2, response_length=3, optimizer_steps=1)
    seconds = Simulator(cluster, settings).inference_seconds(TINY, Layout(1, 1, 1), workload)
    assert seconds == pytest.approx(forward_flops(TINY, 15) / (1e9 * 0.5))
