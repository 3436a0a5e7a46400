"""The latency simulator: formulas in simple cases, and the candidate fronts."""

from __future__ import annotations

import itertools

import attrs
import pytest

from hfsdk import HfsdkError
from hfsdk_backend_common.hybrid.accounting import uniform_transition_bytes
from hfsdk_backend_common.hybrid.layout import GenLayout, TrainLayout
from hfsdk_planner.cluster import a100_80gb
from hfsdk_planner.flops import forward_flops, training_flops
from hfsdk_planner.layout import (
    GenerationLayout,
    Layout,
    generation_layouts,
    running_batch_sizes,
    training_layouts,
)
from hfsdk_planner.model_spec import named_model
from hfsdk_planner.simulator import Simulator, SimulatorSettings, head_tokens
from hfsdk_planner.workload import RoleTask, Workload

SEVEN = named_model("7B")
W = Workload(batch_size=64)
SETTINGS = SimulatorSettings()


def _sim(devices: int = 8, **changes: float) -> Simulator:
    return Simulator(
        attrs.evolve(a100_80gb(), **{"layer_overhead": 0.0, **changes}).with_devices(devices),
        SETTINGS,
    )


def test_inference_without_model_parallelism_is_pure_compute() -> None:
    sim = _sim(8)
    seconds = sim.inference_seconds(SEVEN, Layout(1, 1, 8), W)
    flops = forward_flops(SEVEN, W.tokens, head_tokens(W))
    assert seconds == pytest.approx(flops / (8 * 312e12 * SETTINGS.inference_efficiency))


def test_training_adds_gradient_all_reduce_per_optimizer_step() -> None:
    sim = _sim(8)
    single = sim.training_seconds(SEVEN, Layout(1, 1, 1), W)
    flops = training_flops(SEVEN, W.tokens, W.recompute, head_tokens(W))
    compute = flops / (312e12 * SETTINGS.training_efficiency)
    adam = 28 * SEVEN.num_params / (2.039e12 * SETTINGS.decode_bandwidth_efficiency)
    assert single == pytest.approx(compute + W.optimizer_steps * adam)
    replicated = sim.training_seconds(SEVEN, Layout(1, 1, 8), W)
    bandwidth = 300e9 * SETTINGS.link_efficiency
    ring = 2 * 7 / 8 * 2 * SEVEN.num_params / bandwidth + 3 * 10e-6
    # The distributed optimizer: each device updates its eighth of the Adam state.
    expected = compute / 8 + W.optimizer_steps * (ring + adam / 8)
    assert replicated == pytest.approx(expected)


def test_every_epoch_runs_the_batch_s_passes_and_updates_again() -> None:
    sim = _sim(8)
    one = sim.training_seconds(SEVEN, Layout(1, 1, 1), W)
    four = sim.training_seconds(SEVEN, Layout(1, 1, 1), attrs.evolve(W, epochs=4))
    assert four == pytest.approx(4 * one)


def test_pipeline_bubble_and_tensor_parallel_cost_time() -> None:
    sim = _sim(8)
    base = sim.training_seconds(SEVEN, Layout(1, 1, 8), W)
    assert sim.training_seconds(SEVEN, Layout(8, 1, 1), W) > base * 0.9
    # Gradient traffic crosses nodes only when data parallelism spans them.
    wide = _sim(16).training_seconds(SEVEN, Layout(1, 1, 16), W)
    assert wide > _sim(16).training_seconds(SEVEN, Layout(1, 1, 16), Workload(batch_size=64,
                                            optimizer_steps=1))  # fmt: skip


def test_decode_is_memory_bound_for_small_batches() -> None:
    gen = GenerationLayout(tg=1, dg=1, running=8)
    workload = Workload(batch_size=8, prompt_length=16, response_length=512)
    slow = _sim(1).generation_seconds(SEVEN, gen, workload)
    fast = _sim(1, memory_bandwidth=2 * a100_80gb().memory_bandwidth).generation_seconds(
        SEVEN, gen, workload
    )
    assert fast == pytest.approx(slow / 2, rel=0.05)
    # ...and prefill is compute-bound: long prompts, one token out, twice the FLOP/s.
    prefill = Workload(batch_size=64, prompt_length=4096, response_length=1)
    gen64 = GenerationLayout(tg=1, dg=1, running=64)
    slow = _sim(1).generation_seconds(SEVEN, gen64, prefill)
    fast = _sim(1, peak_flops=2 * 312e12).generation_seconds(SEVEN, gen64, prefill)
    assert fast == pytest.approx(slow / 2, rel=0.05)


def test_smaller_running_batch_means_more_waves() -> None:
    sim = _sim(1)
    full = sim.generation_seconds(SEVEN, GenerationLayout(1, 1, 64), W)
    waves = sim.generation_seconds(SEVEN, GenerationLayout(1, 1, 8), W)
    # Eight waves read the weights eight times per step instead of once; the KV
    # cache read is the same in total.
    weight_read = 2 * SEVEN.num_params / (a100_80gb().memory_bandwidth * 0.7)
    assert waves - full >= 0.99 * W.response_length * 7 * weight_read


def test_transition_gathers_only_when_shards_differ() -> None:
    sim = _sim(8)
    assert sim.transition_seconds(SEVEN, Layout(1, 8, 1), GenerationLayout(8, 1, 64)) == 0.0
    gather = sim.transition_seconds(SEVEN, Layout(1, 8, 1), GenerationLayout(2, 4, 64))
    # Each device receives (1 - 2/8) of a 1/2 shard of the bf16 weights over NVLink.
    assert gather > 3 / 4 * SEVEN.num_params / (300e9 * SETTINGS.link_efficiency)
    # The bytes are the 3D-HybridEngine's own formula (what benchmarks/reshard.py counts).
    nbytes = uniform_transition_bytes(
        SEVEN.num_params, TrainLayout(1, 8, 1), GenLayout(1, 2, 4), element_size=2
    )
    assert nbytes == 3 / 4 * SEVEN.num_params
    bandwidth_part = nbytes / (300e9 * SETTINGS.link_efficiency)
    assert bandwidth_part < gather < 2 * bandwidth_part  # plus ~700 call latencies


def test_a_gather_slower_than_the_ring_bound_slows_gathers_only() -> None:
    ring = _sim(8)
    half = Simulator(ring.cluster, attrs.evolve(SETTINGS, gather_efficiency=0.5))
    nbytes = 1e9
    assert half.allgather(nbytes, 8, 8) == pytest.approx(
        2 * ring.allgather(nbytes, 8, 8, calls=0) + ring.allgather(0, 8, 8)
    )
    assert half.allreduce(nbytes, 8, 8) == ring.allreduce(nbytes, 8, 8)


def test_layouts_respect_the_model_and_the_node() -> None:
    cluster = a100_80gb().with_devices(128)
    model = named_model("13B")  # 40 layers, 40 heads
    layouts = training_layouts(model, 128, cluster, max_data_parallel=10**6)
    assert layouts
    for layout in layouts:
        assert layout.devices == 128
        assert model.num_layers % layout.p == 0 and model.num_heads % layout.t == 0
        assert layout.t <= 8
    assert Layout(16, 8, 1) not in layouts  # 16 does not divide 40 layers
    for gen in generation_layouts(model, Layout(4, 8, 4), cluster, 1024, 256):
        assert 8 % gen.tg == 0 and gen.tg * gen.dg == 128 and gen.running <= 256
    assert running_batch_sizes(100, 256) == [8, 16, 32, 64, 100]
    assert running_batch_sizes(4, 256) == [4]


def test_candidates_form_a_feasible_time_memory_front() -> None:
    sim = _sim(16)
    task = RoleTask(
        model=SEVEN, work=((0, "generation"), (1, "inference"), (2, "training")), workload=W
    )
    front = sim.candidates(task, 16)
    assert front
    for a, b in itertools.pairwise(front):
        assert a.total_seconds <= b.total_seconds and a.peak_bytes > b.peak_bytes
    assert all(c.peak_bytes <= sim.cluster.usable_memory for c in front)
    # The fastest candidate is the fastest of every feasible layout, checked exhaustively.
    every = [
        sim.evaluate(task, layout, gen)
        for layout in training_layouts(SEVEN, 16, sim.cluster, 8)
        for gen in generation_layouts(SEVEN, layout, sim.cluster, W.sequences, 256)
    ]
    feasible = [c for c in every if c.peak_bytes <= sim.cluster.usable_memory]
    assert front[0].total_seconds == min(c.total_seconds for c in feasible)
    assert front[-1].peak_bytes == min(c.peak_bytes for c in feasible)


def test_kv_cache_that_does_not_fit_raises_tensor_parallelism() -> None:
    sim = _sim(8, device_memory=40e9)
    work = ((0, "generation"), (1, "training"))
    short = RoleTask(model=SEVEN, work=work, workload=W)
    long = RoleTask(model=SEVEN, work=work, workload=Workload(batch_size=64, prompt_length=8192,
                                                            response_length=8192))  # fmt: skip
    short_tg = min(c.generation.tg for c in sim.candidates(short, 8))
    long_tg = min(c.generation.tg for c in sim.candidates(long, 8))
    assert long_tg > short_tg


def test_evaluate_needs_a_rollout_layout_for_generation() -> None:
    task = RoleTask(model=SEVEN, work=((0, "generation"),), workload=W)
    with pytest.raises(HfsdkError, match="rollout layout"):
        _sim(8).evaluate(task, Layout(1, 1, 8), None)


def test_bad_settings_and_workloads() -> None:
    with pytest.raises(HfsdkError, match=r"training_efficiency.*\(0, 1\]"):
        SimulatorSettings(training_efficiency=0)
    with pytest.raises(HfsdkError, match="batch_size must be an integer >= 1"):
        Workload(batch_size=0)
    with pytest.raises(HfsdkError, match="each step needs at least one sequence"):
        Workload(batch_size=4, optimizer_steps=8)


def test_fixed_overheads_add_per_layer_call_and_per_decoded_sequence() -> None:
    plain, slow = _sim(1), _sim(1, layer_overhead=1e-3, token_overhead=1e-5)
    calls = SEVEN.num_layers + 1
    micro = W.sequences // W.micro_batch_size
    extra = slow.inference_seconds(SEVEN, Layout(1, 1, 1), W) - plain.inference_seconds(
        SEVEN, Layout(1, 1, 1), W
    )
    assert extra == pytest.approx(micro * calls * 1e-3)
    training = slow.training_seconds(SEVEN, Layout(1, 1, 1), W) - plain.training_seconds(
        SEVEN, Layout(1, 1, 1), W
    )
    assert training == pytest.approx(4 * micro * calls * 1e-3)  # recomputation: 4 passes
    step = slow.decode_step_seconds(SEVEN, 1, 16, 100) - plain.decode_step_seconds(
        SEVEN, 1, 16, 100
    )
    assert step == pytest.approx(calls * (1e-3 + 16 * 1e-5))


def test_sharded_data_parallel_traffic_needs_more_than_one_rank() -> None:
    sim = _sim(8)
    assert sim.sharded_data_parallel_seconds(SEVEN, 1, 4, 4) == 0.0
    one = sim.sharded_data_parallel_seconds(SEVEN, 2, 1, 0)
    assert one > 0
    # A backward pass gathers again and reduce-scatters: three times a forward's traffic.
    assert sim.sharded_data_parallel_seconds(SEVEN, 2, 1, 1) == pytest.approx(3 * one)


def test_devices_that_share_a_memory_bus_decode_slower_together() -> None:
    cpu = attrs.evolve(
        a100_80gb(), device_kind="cpu", devices_per_node=2, memory_bandwidth=20e9,
        shared_memory_bandwidth=26e9, peak_flops=1e20,
    )  # fmt: skip
    assert cpu.bandwidth_per_device(1) == 20e9  # alone: its own figure
    assert cpu.bandwidth_per_device(2) == 13e9  # together: half the node's total
    assert cpu.bandwidth_per_device(8) == 13e9  # only a node's devices share its bus
    assert a100_80gb().bandwidth_per_device(8) == a100_80gb().memory_bandwidth  # own HBM
    sim = Simulator(cpu)
    alone = sim.decode_step_seconds(SEVEN, 1, 4, 100, busy=1)
    together = sim.decode_step_seconds(SEVEN, 1, 4, 100, busy=2)
    overhead = sim.decode_step_seconds(SEVEN, 1, 4, 0, weight_bytes=0)  # no bytes read
    assert together - overhead == pytest.approx((alone - overhead) * 20 / 13)
    # Two replicas of a generation layout stream at once; so do data-parallel optimizers.
    work = Workload(batch_size=8, prompt_length=16, response_length=32)
    one = sim.generation_seconds(SEVEN, GenerationLayout(tg=1, dg=1, running=8), work)
    two = sim.generation_seconds(SEVEN, GenerationLayout(tg=1, dg=2, running=4), work)
    assert two > one / 2
    assert sim.optimizer_step_seconds(SEVEN, 2, busy=2) == pytest.approx(
        sim.optimizer_step_seconds(SEVEN, 2, busy=1) * 20 / 13
    )


def test_a_calibrated_profile_adds_a_decode_steps_reads_and_matmuls() -> None:
    roofline = attrs.evolve(a100_80gb(), layer_overhead=0.0, token_overhead=0.0)
    plain, cpu = Simulator(roofline), Simulator(attrs.evolve(roofline, decode_overlap=False))
    settings = plain.settings
    for running in (1, 64, 4096):  # memory-bound, and compute-bound at the largest
        reads = (
            2
            * SEVEN.num_params
            / (roofline.memory_bandwidth * settings.decode_bandwidth_efficiency)
        )
        flops = forward_flops(SEVEN, running) / (
            roofline.peak_flops * settings.decode_compute_efficiency
        )
        assert plain.decode_step_seconds(SEVEN, 1, running, 0) == pytest.approx(max(reads, flops))
        assert cpu.decode_step_seconds(SEVEN, 1, running, 0) == pytest.approx(reads + flops)
