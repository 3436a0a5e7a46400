"""The planner's count of a model's work, checked by hand on a tiny Llama shape."""

from __future__ import annotations

import pytest

from hfsdk_planner.flops import (
    body_params,
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
SHAPE = dict(
    num_layers=2,
    hidden_size=8,
    num_heads=2,
    num_kv_heads=2,
    intermediate_size=16,
    vocab_size=10,
)
TINY = ModelSpec.from_shape(name="tiny", **SHAPE)
P = 1480
# A pass multiplies the blocks' matrices: all but the embeddings (160) and the 5 norms (40).
N = 1280
# The LM head: hidden 8 x vocabulary 10.
HEAD = 80
# K and V of one token over both layers: 2 x 2 layers x 2 heads x 4 wide x 2 bytes = 64.
KV_PER_TOKEN = 64


def test_the_tiny_model_has_the_hand_counted_parameters() -> None:
    assert TINY.num_params == P
    assert body_params(TINY) == N
    assert TINY.kv_bytes_per_token() == KV_PER_TOKEN
    # Tied, the model has one table fewer but multiplies just as much.
    tied = ModelSpec.from_shape(**{**SHAPE, "name": "tied", "tie_word_embeddings": True})
    assert tied.num_params == P - HEAD and body_params(tied) == N


def test_passes_cost_two_flops_per_block_parameter_and_token_plus_the_head() -> None:
    # The LM head at every position by default, at the given positions only otherwise.
    assert forward_flops(TINY, 15) == 2 * (N + HEAD) * 15 == 40_800
    assert forward_flops(TINY, 15, head_tokens=6) == 2 * (N * 15 + HEAD * 6) == 39_360
    # A critic's head is one wide.
    assert forward_flops(TINY, 15, head_width=1) == 2 * (N + 8) * 15
    assert training_flops(TINY, 15) == 3 * 40_800
    # Recomputation runs the blocks' forward again, but each layer's down projection (16 x 8).
    assert training_flops(TINY, 15, recompute=True) == 3 * 40_800 + 2 * (N - 2 * 128) * 15


def test_a_lora_update_costs_the_frozen_base_two_passes_and_the_adapters_three() -> None:
    from hfsdk_planner.memory_model import lora_params

    adapters = lora_params(TINY, 1)
    assert training_flops(TINY, 15, lora_rank=1) == 2 * 40_800 + 3 * 2 * adapters * 15
    assert training_flops(TINY, 15, lora_rank=1) < training_flops(TINY, 15)


def test_a_decode_step_reads_the_weights_once_and_every_sequence_s_cache() -> None:
    # fp32 weights 4 x 1480 = 5920 bytes; 3 sequences of 5 cached tokens, the cache fp32
    # too: 3 x 5 x 128 = 1920.
    assert decode_step_bytes(TINY, running=3, context=5, weight_bytes=4) == 7_840
    # Two tensor-parallel devices: half the weights, the KV heads split too.
    assert decode_step_bytes(TINY, running=3, context=5, weight_bytes=4, tg=2) == 2_960 + 960


def test_the_kv_cache_is_read_at_the_weights_width() -> None:
    for width in (2, 4):
        kv = decode_step_bytes(TINY, running=3, context=5, weight_bytes=width) - width * P
        assert kv == 3 * 5 * TINY.kv_bytes_per_token(width)


def test_generation_prefills_the_prompts_then_decodes_each_step() -> None:
    # 3 sequences x (5 prompt + 4 generated) tokens x 2 x (1280 + 80): the rollout's decoder
    # computes logits at every position it runs.
    assert generation_flops(TINY, sequences=3, prompt=5, steps=4) == 73_440
    # Mean context 5 + 4 / 2 = 7: each of 4 steps reads 5920 + 3 x 7 x 128 = 8608 bytes.
    assert generation_bytes(TINY, 3, 5, 4, weight_bytes=4) == 4 * 8_608
    # Two at a time: a wave of 2 and one of 1 each read the weights: (5920 + 1792) + (5920 + 896).
    assert generation_bytes(TINY, 3, 5, 4, running=2, weight_bytes=4) == 4 * 14_528


def test_the_simulator_prices_the_same_count() -> None:
    import attrs

    from hfsdk_planner.cluster import local
    from hfsdk_planner.layout import Layout
    from hfsdk_planner.simulator import Simulator, SimulatorSettings, head_tokens
    from hfsdk_planner.workload import Workload

    cluster = attrs.evolve(local(), peak_flops=1e9, layer_overhead=0.0).with_devices(1)
    settings = SimulatorSettings(inference_efficiency=0.5)
    workload = Workload(batch_size=3, prompt_length=2, response_length=3, optimizer_steps=1)
    seconds = Simulator(cluster, settings).inference_seconds(TINY, Layout(1, 1, 1), workload)
    # The LM head at the 3 x (3 + 1) response positions only.
    assert head_tokens(workload) == 12
    assert seconds == pytest.approx(forward_flops(TINY, 15, 12) / (1e9 * 0.5))


def test_the_memory_model_holds_the_kv_cache_at_the_weights_width() -> None:
    from hfsdk_planner.layout import GenerationLayout, Layout
    from hfsdk_planner.memory_model import generation_bytes as generation_memory
    from hfsdk_planner.workload import Workload

    gen = GenerationLayout(tg=1, dg=1, running=4)

    def kv(width: int) -> float:
        workload = Workload(batch_size=4, optimizer_steps=1, dtype_bytes=width)
        return generation_memory(TINY, Layout(1, 1, 1), gen, workload)

    assert kv(2) == 4 * 2048 * KV_PER_TOKEN
    assert kv(4) == 2 * kv(2)


@pytest.mark.parametrize("size", ["350M", "8B", "14B", "32B", "7B"])
def test_a_head_is_counted_once_whatever_the_shape(size: str) -> None:
    # The tie was guessed from the count, which a shape's rounding moved more than V x h:
    # 350M was counted tied, its head then added twice (1.10x).
    from hfsdk_planner.model_spec import resolve_model

    model = resolve_model(size)
    table = model.vocab_size * model.hidden_size
    norms = (2 * model.num_layers + 1) * model.hidden_size
    body = model.num_params - (1 if model.tied_embeddings else 2) * table - norms
    expected = 2.0 * (body + table) * 100
    assert forward_flops(model, 100) == pytest.approx(expected, rel=1e-12)
