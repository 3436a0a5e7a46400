"""Per-stage utilisation: the step's shape, the work per stage and its share of the peaks."""

from __future__ import annotations

import attrs
import pytest

from hfsdk_planner.cluster import local
from hfsdk_planner.model_spec import ModelSpec
from hfsdk_planner.utilisation import StageWork, stage_work, step_shape, utilisation_metrics

# The tiny Llama of test_flops.py: 1480 parameters (1280 in the blocks' matrices), 64
# KV-cache bytes per token in bf16.
TINY = ModelSpec.from_shape(
    name="tiny",
    num_layers=2,
    hidden_size=8,
    num_heads=2,
    num_kv_heads=2,
    intermediate_size=16,
    vocab_size=10,
)
PEAK = 1e9
BANDWIDTH = 1e8


def _cpu(measured: bool = True) -> object:
    return attrs.evolve(
        local(), peak_flops=PEAK, memory_bandwidth=BANDWIDTH, peaks_measured=measured
    ).with_devices(2)


def test_the_step_shape_counts_padded_rows_unless_packed() -> None:
    # 3 sequences, 30 real tokens (10 each), responses 4 on average, rows padded to 12.
    metrics = {"perf/tokens": 30.0, "response_length/mean": 4.0, "perf/sequence_width": 12.0}
    shape = step_shape(metrics, sequences=3, max_response=64)
    assert shape is not None
    assert shape.pass_tokens == 36  # 3 rows x 12
    assert shape.prompt_tokens == 6  # 10 - 4
    assert shape.decode_steps == 6  # the longest response: 12 - 6
    assert step_shape(metrics, 3, max_response=5).decode_steps == 5  # never past the limit
    assert step_shape(metrics, 3, 64, packed=True).pass_tokens == 30
    assert step_shape({"response_length/mean": 4.0}, 3, 64) is None  # no token count


def test_stage_work_follows_the_role_kinds_and_their_timings() -> None:
    shape = step_shape(
        {"perf/tokens": 30.0, "response_length/mean": 4.0, "perf/sequence_width": 12.0}, 3, 64
    )
    roles = {
        "actor": ("policy", ("generation", "inference", "training"), TINY, 1),
        "reference": ("frozen_policy", ("inference",), TINY, 1),
    }
    work = stage_work(roles, shape, weight_bytes=4)
    assert set(work) == {"generation", "old_log_prob", "ref_log_prob", "update_actor"}
    # The blocks' 1280 matrix parameters at all 36 tokens, the LM head (8 x 10) at the
    # response positions only: 3 rows x (6 + 1).
    assert shape.head_tokens == 21
    forward = 2 * (1280 * 36 + 80 * 21)
    assert work["update_actor"].flops == 3 * forward
    assert work["ref_log_prob"].flops == forward
    assert work["generation"].flops == 2 * (1280 + 80) * 3 * (6 + 6)
    # 6 steps, each the fp32 weights and 3 sequences' fp32 caches of mean context 6 + 6 / 2.
    assert work["generation"].bytes == 6 * (4 * 1480 + 3 * 9 * 128)


def test_a_critic_s_head_is_one_wide_at_every_position() -> None:
    shape = step_shape(
        {"perf/tokens": 30.0, "response_length/mean": 4.0, "perf/sequence_width": 12.0}, 3, 64
    )
    work = stage_work({"critic": ("value", ("inference", "training"), TINY, 1)}, shape)
    assert work["values"].flops == 2 * (1280 + 8) * 36
    assert work["update_critic"].flops == 3 * 2 * (1280 + 8) * 36


def test_each_role_s_own_epochs_recompute_and_width_count() -> None:
    from hfsdk_planner.workload import Workload

    shape = step_shape(
        {"perf/tokens": 30.0, "response_length/mean": 4.0, "perf/sequence_width": 12.0}, 3, 64
    )
    roles = {
        "actor": ("policy", ("training",), TINY, 1),
        "critic": ("value", ("training",), TINY, 1),
    }
    plain = stage_work(roles, shape, recompute=True)
    own = {
        "actor": Workload(batch_size=3, optimizer_steps=1, epochs=4, recompute=True),
        "critic": Workload(batch_size=3, optimizer_steps=1, recompute=False),
    }
    work = stage_work(roles, shape, recompute=True, workloads=own)
    assert work["update_actor"].flops == 4 * plain["update_actor"].flops
    assert work["update_critic"].flops == 3 * 2 * (1280 + 8) * 36  # no recomputation


def test_generation_bytes_count_each_replica_s_weights() -> None:
    """Two replicas each decode half the rows and read the whole weights every step."""
    from hfsdk_planner.flops import generation_bytes

    shape = step_shape(
        {"perf/tokens": 40.0, "response_length/mean": 4.0, "perf/sequence_width": 10.0}, 4, 64
    )
    roles = {"actor": ("policy", ("generation",), TINY, 2)}
    two = stage_work(roles, shape, running=4)
    half = generation_bytes(TINY, 2, shape.prompt_tokens, shape.decode_steps)
    assert two["generation"].bytes == 2 * half
    one = stage_work({"actor": ("policy", ("generation",), TINY, 1)}, shape, running=4)
    assert two["generation"].flops == one["generation"].flops
    # A tensor-parallel pair is one replica: the weights are read once per step.
    tp = stage_work(roles, shape, running=4, generation_tp=2)
    assert tp["generation"].bytes < two["generation"].bytes


def test_utilisation_is_flops_over_seconds_over_the_peak() -> None:
    work = {
        "update_actor": StageWork(name="update_actor", flops=133_200.0, devices=1),
        "generation": StageWork(name="generation", flops=88_800.0, bytes=50_000.0, devices=2),
    }
    metrics = {
        "timing/update_actor_s": 1e-3,
        "timing/generation_s": 2.5e-3,
        "timing/reshard_s": 0.5e-3,  # generation's own seconds leave the transition out
        "perf/reshard_bytes": 4e3,
    }
    out = utilisation_metrics(work, metrics, _cpu())
    assert out["perf/update_actor_flops_per_s"] == pytest.approx(133.2e6)
    assert out["perf/update_actor_mfu"] == pytest.approx(133.2e6 / PEAK)
    # Two devices share generation's work: per device 88,800 / 2e-3 / 2.
    assert out["perf/generation_flops_per_s"] == pytest.approx(22.2e6)
    assert out["perf/generation_mfu"] == pytest.approx(22.2e6 / PEAK)
    assert out["perf/generation_bytes_per_s"] == pytest.approx(12.5e6)
    assert out["perf/generation_bandwidth_util"] == pytest.approx(12.5e6 / BANDWIDTH)
    assert out["perf/reshard_bytes_per_s"] == pytest.approx(8e6)
    assert "perf/old_log_prob_flops_per_s" not in out  # not timed this step: nothing


def test_an_uncalibrated_guess_gives_rates_but_no_share_of_a_peak() -> None:
    work = {"update_actor": StageWork(name="update_actor", flops=1e6)}
    out = utilisation_metrics(work, {"timing/update_actor_s": 1.0}, _cpu(measured=False))
    assert out == {"perf/update_actor_flops_per_s": 1e6}
    assert local().peaks_measured is False


def test_the_logged_sequence_width_is_the_columns_some_row_uses() -> None:
    """DAPO left-pads prompts to max_prompt_length, and the passes drop the columns that
    are padding in every row (remove_padding): the width the step shape multiplies the
    rows by is those columns, not input_ids' (which put DAPO's MFU above 100 %)."""
    import torch

    from hfsdk.core.batch import Batch
    from hfsdk_testing import FakeRun

    algorithm = FakeRun.for_algorithm("grpo").algorithm  # finish() is the core's, any will do
    # 8 prompt + 2 response columns (left-padded, as DAPO's prompts are); prompts of 3 and 2 tokens, responses of 2 and 1.
    attention = torch.zeros(2, 10, dtype=torch.long)
    attention[0, 5:10] = 1
    attention[1, 6:9] = 1
    batch = Batch.from_dict(
        {
            "input_ids": torch.zeros(2, 10, dtype=torch.long),
            "attention_mask": attention,
            "response_mask": torch.tensor([[1, 1], [1, 0]]),
        }
    )
    metrics = algorithm.finish(batch)
    assert metrics["perf/sequence_width"] == 5.0  # columns 5..9; 0..4 are padding in both
    shape = step_shape(metrics, sequences=2, max_response=2)
    assert shape is not None and shape.pass_tokens == 10  # 2 rows x 5, not 2 x 10
