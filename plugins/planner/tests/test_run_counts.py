"""A run's setup counts and prices the work the run really does, role by role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk_planner.run_plan import check_run, price_setup, run_setup
from hfsdk_planner.run_utilisation import setup_stage_work, step_utilisation
from hfsdk_planner.utilisation import StepShape

SHAPE = StepShape(sequences=8, pass_tokens=8 * 12, prompt_tokens=8, decode_steps=4)


def _work(algorithm: str, *overrides: str) -> dict:
    return setup_stage_work(run_setup(load_run_config(algorithm, None, list(overrides))), SHAPE)


def test_every_ppo_epoch_is_counted_and_priced_for_each_role() -> None:
    one = _work("ppo", "actor.ppo_epochs=1", "critic.ppo_epochs=1")
    four = _work("ppo", "actor.ppo_epochs=4", "critic.ppo_epochs=2")
    assert four["update_actor"].flops == pytest.approx(4 * one["update_actor"].flops)
    assert four["update_critic"].flops == pytest.approx(2 * one["update_critic"].flops)
    setup = run_setup(load_run_config("ppo", None, ["actor.ppo_epochs=4"]))
    assert setup.workload.epochs == 4
    # The updates per epoch stay the mini-batches; the epochs repeat them.
    once = run_setup(load_run_config("ppo", None, ["actor.ppo_epochs=1"]))
    assert setup.workload.optimizer_steps == once.workload.optimizer_steps
    training = price_setup(setup, "local").stages.index("training")
    assert (
        price_setup(setup, "local").role("actor").stage_seconds[training]
        > 3 * price_setup(once, "local").role("actor").stage_seconds[training]
    )


def test_each_role_keeps_its_own_gradient_checkpointing() -> None:
    both = _work("ppo", "actor.gradient_checkpointing=false", "critic.gradient_checkpointing=false")
    actor_only = _work(
        "ppo", "actor.gradient_checkpointing=true", "critic.gradient_checkpointing=false"
    )
    assert actor_only["update_critic"].flops == both["update_critic"].flops
    assert actor_only["update_actor"].flops > both["update_actor"].flops


@pytest.mark.parametrize("algorithm", ["dpo", "sft"])
def test_an_algorithm_that_trains_on_its_dataset_generates_nothing(algorithm: str) -> None:
    from hfsdk_planner import plan_for_algorithm

    setup = run_setup(load_run_config(algorithm))
    assert all(kind != "generation" for s in setup.dataflow.stages for _r, kind in s.work)
    plan = price_setup(setup, "local")
    assert plan.role("actor").generation is None
    assert plan.stage_seconds[plan.stages.index("generation")] == 0.0
    assert "generation" not in setup_stage_work(setup, SHAPE)
    searched = plan_for_algorithm(algorithm, model_size="7B", num_devices=8, cluster="a100-80gb")
    assert searched.role("actor").generation is None


def test_an_overlapped_pipeline_logs_no_generation_utilisation() -> None:
    from hfsdk_planner.cluster import local

    metrics = {
        "perf/tokens": 8 * 12.0,
        "response_length/mean": 4.0,
        "timing/step_s": 1.0,
        "timing/generation_s": 0.001,  # the wait for a batch decoded during the last step
        "timing/update_actor_s": 0.5,
    }
    overrides = ["placement.pools.global.devices=1", "placement.pools.rollout.devices=1"]
    hardware = local().with_devices(2)
    for pipeline, logged in (("sync", True), ("one_step_off", False), ("async", False)):
        setup = run_setup(
            load_run_config("grpo", None, [*overrides, f"trainer.pipeline={pipeline}"])
        )
        out = step_utilisation(setup, hardware, metrics)
        assert ("perf/generation_flops_per_s" in out) is logged
        assert "perf/update_actor_flops_per_s" in out


def test_generation_reads_each_replica_s_weights() -> None:
    one = _work("grpo", "placement.pools.global.devices=1")
    two = _work("grpo", "placement.pools.global.devices=2")
    assert two["generation"].flops == one["generation"].flops
    # Two replicas of four sequences each read the weights per step: more than one replica.
    assert two["generation"].bytes > one["generation"].bytes


def test_check_leaves_validation_out_of_the_measured_step(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_run_config("grpo").to_yaml())
    rows = [
        {
            "step": step,
            "response_length/mean": 4.0,
            "perf/tokens": 64 * 12.0,
            "timing/step_s": 0.05 + validation,
            "timing/validation_s": validation,
            "timing/update_actor_s": 0.02,
        }
        for step, validation in ((1, 0.0), (2, 0.3), (3, 0.0))
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, table = check_run(run, "local")
    assert {r.name: r for r in table}["step"].measured == pytest.approx(0.05)


def test_each_role_s_utilisation_is_against_its_own_dtype_s_peak() -> None:
    import attrs

    from hfsdk_planner.cluster import local

    hardware = attrs.evolve(
        local(),
        peak_flops=100e9,
        peaks_measured=True,
        flops_by_dtype={"bfloat16": 100e9, "float32": 25e9},
    ).with_devices(1)
    setup = run_setup(
        load_run_config("ppo", None, ["actor.dtype=bfloat16", "critic.dtype=float32"])
    )
    metrics = {
        "perf/tokens": 8 * 12.0,
        "response_length/mean": 4.0,
        "timing/step_s": 1.0,
        "timing/update_actor_s": 0.5,
        "timing/update_critic_s": 0.5,
    }
    out = step_utilisation(setup, hardware.for_dtype("bfloat16"), metrics)
    assert out["perf/update_actor_mfu"] == pytest.approx(
        out["perf/update_actor_flops_per_s"] / 100e9
    )
    assert out["perf/update_critic_mfu"] == pytest.approx(
        out["perf/update_critic_flops_per_s"] / 25e9
    )


def test_a_lora_update_is_counted_and_priced_below_full_fine_tuning() -> None:
    full = run_setup(load_run_config("grpo", None, ["actor.lora.rank=0"]))
    lora = run_setup(load_run_config("grpo", None, ["actor.lora.rank=8"]))
    assert lora.workload.lora_rank == 8
    counted = [setup_stage_work(s, SHAPE)["update_actor"].flops for s in (full, lora)]
    assert counted[1] < counted[0]
    training = [price_setup(s, "local").role("actor").stage_seconds[2] for s in (full, lora)]
    assert training[1] < training[0]
