"""The planner on a run's own setup: function signals, real models, --check, the step metric."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config
from hfsdk_planner import get_cluster, plan_for_algorithm
from hfsdk_planner.cli.plan_command import plan as plan_command
from hfsdk_planner.flops import forward_flops
from hfsdk_planner.layout import Layout
from hfsdk_planner.model_spec import llama_param_count
from hfsdk_planner.run_plan import (
    check_run,
    format_check,
    measured_stages,
    price_setup,
    run_setup,
)
from hfsdk_planner.simulator import Simulator

SHAPE = {
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "intermediate_size": 512,
    "vocab_size": 1000,
}


def _model_dir(root: Path, name: str, **changes: int) -> Path:
    path = root / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps({**SHAPE, **changes}))
    return path


def test_a_function_reward_has_no_model_cost() -> None:
    setup = run_setup(load_run_config("grpo"))
    assert setup.functions == ("reward",)
    assert "reward" not in setup.dataflow.roles
    plan = price_setup(setup, "local")
    assert [r.role for r in plan.roles] == ["actor", "reference"]
    assert plan.functions == ("reward",)
    assert "function signals" in plan.format_table()

    kwargs = dict(model_size="7B", num_devices=8, cluster="a100-80gb")
    as_model = plan_for_algorithm("grpo", **kwargs)
    as_function = plan_for_algorithm("grpo", role_sizes={"reward": "function"}, **kwargs)
    prep = as_model.stages.index("preparation")
    assert as_function.stage_seconds[prep] < as_model.stage_seconds[prep]
    assert as_function.functions == ("reward",)
    assert "reward" not in [r.role for r in as_function.roles]
    with pytest.raises(HfsdkError, match="only a reward or cost role can be a function"):
        plan_for_algorithm("grpo", role_sizes={"actor": "function"}, **kwargs)


def test_a_frozen_reference_costs_one_forward_pass() -> None:
    setup = run_setup(load_run_config("grpo"))
    plan = price_setup(setup, "local")
    reference = plan.role("reference")
    prep = plan.stages.index("preparation")
    busy = [s for s in reference.stage_seconds if s]
    assert len(busy) == 1  # no generation, no training
    simulator = Simulator(plan_cluster := get_cluster("local"))
    del plan_cluster
    expected = simulator.inference_seconds(
        setup.models["reference"], Layout(1, 1, 1), setup.workload
    )
    assert reference.stage_seconds[prep] == pytest.approx(expected)


def test_model_path_gives_each_role_its_real_size(tmp_path: Path) -> None:
    actor = _model_dir(tmp_path, "actor")
    critic = _model_dir(tmp_path, "critic", num_hidden_layers=2, hidden_size=128)
    cfg = load_run_config("ppo").to_dict()
    cfg["actor"]["model_path"] = str(actor)
    cfg["critic"]["model_path"] = str(critic)
    setup = run_setup(cfg)
    expected = llama_param_count(
        num_layers=4, hidden_size=256, num_heads=4, num_kv_heads=4, intermediate_size=512,
        vocab_size=1000,
    )  # fmt: skip
    assert setup.models["actor"].num_params == expected
    assert setup.models["reference"] == setup.models["actor"]  # no path: the actor's model
    assert setup.models["critic"].num_layers == 2 and setup.models["critic"].hidden_size == 128
    assert setup.functions == ("reward",)


def test_an_on_policy_update_skips_the_old_log_probs() -> None:
    cfg = load_run_config("grpo").to_dict()
    sequences = cfg["data"]["batch_size"] * cfg["algorithm"]["n_samples_per_prompt"]
    prep = {s.name: s for s in run_setup(cfg).dataflow.stages}["preparation"]
    assert ("actor", "inference") in prep.work  # two mini-batches: old log-probs needed
    cfg["actor"]["mini_batch_size"] = sequences
    prep = {s.name: s for s in run_setup(cfg).dataflow.stages}["preparation"]
    assert ("actor", "inference") not in prep.work
    assert ("reference", "inference") in prep.work


def _row(step: int, **timings: float) -> dict[str, float]:
    return {
        "step": step,
        "response_length/mean": 4.0,
        "perf/throughput_tokens_per_s": 64 * 12 / 0.05,
        "timing/step_s": 0.05,
        **{f"timing/{k}_s": v for k, v in timings.items()},
    }


def test_check_compares_a_recorded_run_stage_by_stage(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_run_config("grpo").to_yaml())
    timings = dict(
        generation=0.012, reshard=0.002, old_log_prob=0.010, ref_log_prob=0.011, reward=0.001,
        advantages=0.0005, update_actor=0.020,
    )  # fmt: skip
    rows = [_row(1, **{k: 10 * v for k, v in timings.items()}), _row(2, **timings)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    stages = measured_stages(rows[1], ("reward",))
    assert stages["generation"] == pytest.approx(0.010)
    assert stages["preparation"] == pytest.approx(0.011 + 0.001 + 0.0005)  # concurrent: max
    assert stages["training"] == pytest.approx(0.020)
    assert stages["transition"] == pytest.approx(0.002)

    plan, table = check_run(run, "local")
    by = {r.name: r for r in table}
    assert by["training"].measured == pytest.approx(0.020)  # the first step is left out
    assert by["step"].measured == pytest.approx(0.05)
    assert by["step"].predicted == pytest.approx(plan.iteration_seconds)
    assert plan.workload.response_length == 4  # the run's mean, not the config's maximum
    assert plan.workload.prompt_length == 8  # 12 tokens per sequence minus 4

    result = CliRunner().invoke(plan_command, ["--check", str(run), "--cluster", "local"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line.split()[1:] for line in result.output.splitlines() if line}
    for stage in ("generation", "preparation", "training", "transition", "step"):
        assert stage in lines
    predicted, measured, ratio = map(float, lines["training"][:3])
    assert measured == pytest.approx(0.020, abs=1e-4)
    assert ratio == pytest.approx(predicted / measured, rel=0.02)

    # Before: a directory that does not exist had its "config.yaml missing".
    result = CliRunner().invoke(plan_command, ["--check", str(tmp_path / "none")])
    assert isinstance(result.exception, HfsdkError)
    assert f"--check {str(tmp_path / 'none')!r}: the directory does not exist" in str(
        result.exception
    )
    assert "config.yaml is missing" not in str(result.exception)
    (tmp_path / "bare").mkdir()
    result = CliRunner().invoke(plan_command, ["--check", str(tmp_path / "bare")])
    assert "config.yaml is missing" in str(result.exception)


def test_check_reads_a_damaged_log_and_never_predicts_from_nan(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_run_config("grpo").to_yaml())
    timings = dict(generation=0.012, update_actor=0.020)
    rows = [_row(1, **timings), _row(2, **timings)]
    del rows[1]["response_length/mean"]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, table = check_run(run, "local")
    expected = {r.name: r.predicted for r in table}
    # A NaN mean length (logged as null) is no length; a killed run leaves half a line.
    rows[1]["response_length/mean"] = None
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3, "timing/st'
    )
    _, table = check_run(run, "local")  # before: JSONDecodeError; max(1.0, nan) -> 1 token
    assert {r.name: r.predicted for r in table} == pytest.approx(expected)
    for text, said in (("[1, 2]\n", "no run config"), ("a: [\n", "config.yaml is not YAML")):
        (run / "config.yaml").write_text(text)
        with pytest.raises(HfsdkError, match=said):
            check_run(run, "local")


def test_check_skips_a_non_numeric_value_with_one_warning_per_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A hand-edited or merged log: before, a value that is no number was dropped silently
    # (a stage measured as 0 s without a word); now with one warning naming file and line.
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_run_config("grpo").to_yaml())
    timings = dict(generation=0.012, update_actor=0.020)
    rows = [_row(step, **timings) for step in (1, 2, 3)]
    path = run / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, table = check_run(run, "local")
    expected = {r.name: r.measured for r in table}
    rows[0]["timing/update_actor_s"] = "abc"  # the warm-up step: left out of the measure
    rows[2]["timing/update_actor_s"] = "abc"
    rows[2]["timing/generation_s"] = "0.012"  # a number as text counts as that number
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level("WARNING"):
        _, table = check_run(run, "local")
    warned = [r.getMessage() for r in caplog.records if "timing/update_actor_s" in r.getMessage()]
    assert len(warned) == 1, warned  # once per key, not once per line
    assert f"{path} line 1: timing/update_actor_s is 'abc', not a number; skipped" in warned[0]
    assert "and on 1 later line" in warned[0]
    assert not [r for r in caplog.records if "timing/generation_s" in r.getMessage()]
    measured = {r.name: r.measured for r in table}
    assert measured["generation"] == pytest.approx(expected["generation"])
    assert measured["training"] == pytest.approx(expected["training"] / 2)  # step 3: none


def test_a_sharded_actor_pays_its_gather_copies_and_fixed_work_to_generate() -> None:
    from hfsdk_planner.cluster import local
    from hfsdk_planner.run_plan import STREAM_COPIES

    setup = run_setup(load_run_config("grpo", None, ["placement.pools.global.devices=2"]))
    base = attrs.evolve(local(), intra_node_bandwidth=1e9, efficiency={"link_efficiency": 1.0})
    slow = attrs.evolve(
        base,
        reshard_overhead=0.01,
        fresh_memory_bandwidth=1e9,
        efficiency={"link_efficiency": 1.0, "gather_efficiency": 0.5},
    )

    def transition(cluster: object) -> float:
        return next(r.transition_seconds for r in price_setup(setup, cluster).roles if r.generation)

    model = setup.models["actor"]
    weights = setup.workload.dtype_bytes * model.num_params
    latency = (model.num_layers + 1) * base.intra_node_latency
    bandwidth = base.with_devices(2).bandwidth_per_device(2)
    copies = (STREAM_COPIES + 1) * weights / bandwidth
    # Two ranks: each receives half the weights, at the link's bandwidth, then copies them.
    assert transition(base) == pytest.approx(weights / 2 / 1e9 + latency + copies)
    # At half the ring bound the bytes take twice as long; the fixed work is added once;
    # the generation module's weights are written at the rate of a fresh allocation.
    fresh = STREAM_COPIES * weights / bandwidth + weights / 1e9
    assert transition(slow) == pytest.approx(weights / 1e9 + latency + fresh + 0.01)
    # weight_sync: gather generates on the unsharded actor: only the gather's copy-out.
    setup = run_setup(
        load_run_config(
            "grpo", None, ["placement.pools.global.devices=2", "rollout.weight_sync=gather"]
        )
    )
    assert setup.weight_sync == "gather"
    in_place = 2 * weights / bandwidth
    assert transition(slow) == pytest.approx(weights / 1e9 + latency + in_place + 0.01)


def _pooled(pipeline: str, rollout: int = 1, **extra: str) -> dict:
    overrides = [
        f"trainer.pipeline={pipeline}",
        "placement.pools.global.devices=1",
        f"placement.pools.rollout.devices={rollout}",
        *(f"{k}={v}" for k, v in extra.items()),
    ]
    return load_run_config("grpo", None, overrides).to_dict()


def test_a_rollout_pool_takes_the_generation_and_a_pipeline_overlaps_it() -> None:
    sync = run_setup(_pooled("sync"))
    assert sync.rollout_devices == 1 and sync.pipeline == "sync" and not sync.in_process
    assert [p[0] for p in sync.pools] == ["global"]  # the replicas' pool holds no role
    plan = price_setup(sync, "local")
    actor = next(r for r in plan.roles if r.role == "actor")
    assert actor.generation is not None and actor.generation.dg == 1
    assert actor.transition_seconds > 0  # the weight broadcast after each update
    generation, *others = plan.stage_seconds
    assert generation == pytest.approx(actor.stage_seconds[0])
    assert plan.iteration_seconds == pytest.approx(
        generation + sum(others) + actor.transition_seconds
    )
    for pipeline in ("one_step_off", "async"):
        overlapped = price_setup(run_setup(_pooled(pipeline)), "local")
        assert overlapped.iteration_seconds == pytest.approx(
            max(generation, sum(others)) + actor.transition_seconds
        )
    # Two replicas split the sequences: generation gets faster.
    two = price_setup(run_setup(_pooled("sync", rollout=2)), "local")
    assert two.stage_seconds[0] < generation
    # One replica of two tensor-parallel ranks, or of two pipeline stages: one replica.
    for key in ("tp", "pp"):
        one = price_setup(
            run_setup(_pooled("sync", rollout=2, **{f"placement.pools.rollout.{key}": "2"})),
            "local",
        )
        actor = next(r for r in one.roles if r.role == "actor")
        assert actor.generation.dg == 1 and actor.generation.tg == (2 if key == "tp" else 1)


def test_auto_placement_sizes_a_rollout_pool_for_overlapped_pipelines() -> None:
    from hfsdk_planner import get_cluster
    from hfsdk_planner.run_plan import plan_rollout_split

    # Slow links: sharding the actor over every device and gathering it to generate costs
    # more than a replica of its own fed once per step.
    slow = attrs.evolve(
        get_cluster("local"), intra_node_latency=5e-3, intra_node_bandwidth=1e8,
        inter_node_latency=5e-3, inter_node_bandwidth=1e8,
    )  # fmt: skip
    cfg = _pooled("one_step_off")
    section, plan = plan_rollout_split(cfg, 2, slow)
    assert section["pools"]["rollout"] == {"devices": 1}
    assert sum(p["devices"] for p in section["pools"].values()) == 2
    assert "rollout" not in section["roles"].values()
    whole = attrs.evolve(slow, nodes=1, devices_per_node=2)
    colocated = attrs.evolve(
        run_setup(cfg), rollout_devices=0, pools=(("global", 2, ("actor", "reference")),)
    )
    assert plan.iteration_seconds < price_setup(colocated, whole).iteration_seconds
    # Fast links on the same devices: no pool of its own.
    section, _plan = plan_rollout_split(cfg, 2, attrs.evolve(slow, intra_node_latency=1e-6,
                                                             intra_node_bandwidth=1e11))  # fmt: skip
    assert "rollout" not in section["pools"]


def _threaded_profile(path: Path) -> Path:
    """Two cores; one thread computes at 50 GFLOP/s, two at 80 (not twice)."""
    from hfsdk_planner.cluster import local

    cluster = attrs.evolve(
        local(),
        peak_flops=50e9,
        flops_by_dtype={"float32": 50e9},
        peaks_measured=True,
        by_threads={2: {"flops_by_dtype": {"float32": 80e9}, "peak_flops": 80e9}},
    ).with_devices(2)
    cluster.save(path)
    return path


def test_a_run_is_priced_at_the_threads_its_workers_use(tmp_path: Path) -> None:
    from hfsdk import worker_threads
    from hfsdk_planner.run_plan import run_hardware

    profile = str(_threaded_profile(tmp_path / "cpu.yaml"))
    one = run_setup(load_run_config("grpo", None, ["trainer.worker_threads=1"]))
    two = run_setup(load_run_config("grpo", None, ["trainer.worker_threads=2"]))
    assert (one.threads, two.threads) == (1, 2)
    # Automatic: the same decision the session makes for its device slots.
    auto = run_setup(load_run_config("grpo", None, ["placement.pools.global.devices=2"]))
    assert auto.threads == worker_threads(0, 2)
    assert run_hardware(one, profile).peak_flops == 50e9
    assert run_hardware(two, profile).peak_flops == 80e9
    fast, slow = price_setup(two, profile), price_setup(one, profile)
    assert fast.threads_per_device == 2 and slow.threads_per_device == 1
    assert fast.iteration_seconds < slow.iteration_seconds
    # Two devices on two cores: each has one core, more threads only contend.
    crowded = attrs.evolve(
        run_setup(load_run_config("grpo", None, ["placement.pools.global.devices=2"])),
        threads=2,
    )
    assert run_hardware(crowded, profile).peak_flops == 50e9


def test_searches_price_the_threads_a_run_on_those_devices_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    profile = str(_threaded_profile(tmp_path / "cpu.yaml"))
    # One device on two cores: the run's worker takes both, and the search prices that.
    alone = plan_for_algorithm("grpo", model_size="1M", num_devices=1, cluster=profile)
    single = plan_for_algorithm("grpo", model_size="1M", num_devices=1, cluster=profile, threads=1)
    assert (alone.threads_per_device, single.threads_per_device) == (2, 1)
    assert alone.iteration_seconds < single.iteration_seconds
    assert "2 CPU thread(s) each" in alone.format_table()
    # Two devices share the two cores: one thread each, whatever the profile measured at two.
    shared = plan_for_algorithm("grpo", model_size="1M", num_devices=2, cluster=profile)
    assert shared.threads_per_device == 1
    # placement: auto prices the threads the session will give the run's workers.
    from hfsdk_planner.resolve import resolve_placement

    seen: list[int | None] = []

    def record(algorithm: str, **kwargs: object) -> dict:
        seen.append(kwargs.get("threads"))  # type: ignore[arg-type]
        return {"pools": {"global": {"devices": 1}}, "roles": {}}

    monkeypatch.setattr("hfsdk_planner.auto.auto_placement_section", record)
    resolve_placement(
        load_run_config("grpo", None, ["placement.mode=auto", f"placement.cluster={profile}"])
    )
    resolve_placement(
        load_run_config(
            "grpo",
            None,
            ["placement.mode=auto", f"placement.cluster={profile}", "trainer.worker_threads=1"],
        )
    )
    assert seen == [2, 1]


def test_check_prices_the_threads_the_run_logged_and_shows_utilisation(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    profile = str(_threaded_profile(tmp_path / "cpu.yaml"))
    (run / "config.yaml").write_text(
        load_run_config("grpo", None, ["trainer.worker_threads=1"]).to_yaml()
    )
    timings = dict(generation=0.012, ref_log_prob=0.011, old_log_prob=0.01, update_actor=0.020)
    rows = [
        {**_row(step, **timings), "perf/worker_threads": 2.0, "perf/sequence_width": 12.0}
        for step in (1, 2)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plan, table = check_run(run, profile)
    assert plan.threads_per_device == 2  # logged by the run, not the config's 1
    by = {r.name: r for r in table}
    setup = run_setup(load_run_config("grpo"))
    model = setup.models["actor"]
    sequences = setup.workload.sequences
    # A pass: the padded rows (12 tokens) through the blocks, the LM head at the response's
    # 4 positions and the one before them.
    forward = forward_flops(model, sequences * 12, head_tokens=sequences * 5)
    # Training: a forward and a backward (three forwards) in 0.020 s.
    flops = 3 * forward / 0.020
    assert by["training"].flops_per_s == pytest.approx(flops)
    assert by["training"].mfu == pytest.approx(flops / 80e9)
    # Preparation: the old and reference passes in the stage's 0.011 s.
    assert by["preparation"].flops_per_s == pytest.approx(2 * forward / 0.011)
    result = CliRunner().invoke(plan_command, ["--check", str(run), "--cluster", profile])
    assert result.exit_code == 0, result.output
    assert "MFU" in result.output and "2 CPU thread(s) each" in result.output
    cells = {line.split()[0]: line.split()[1:] for line in result.output.splitlines() if line}
    assert cells["training"][4] == f"{flops / 80e9:.0%}"


def test_check_counts_the_rows_dpo_trains_two_per_prompt(tmp_path: Path) -> None:
    """DPO's batch holds a chosen and a rejected row per prompt (``perf/batch_rows``):
    the work and the lengths are per row, not per batch x samples (that halved its FLOPs)."""
    run = tmp_path / "run"
    run.mkdir()
    config = load_run_config("dpo", None, ["data.batch_size=16"])
    (run / "config.yaml").write_text(config.to_yaml())
    row = {
        "response_length/mean": 2.0,
        "perf/throughput_tokens_per_s": 32 * 7 / 0.05,  # 32 rows of 5 + 2 tokens
        "timing/step_s": 0.05,
        "timing/update_actor_s": 0.020,
        "perf/sequence_width": 7.0,
        "perf/batch_rows": 32.0,
    }
    lines = [json.dumps({"step": step, **row}) + "\n" for step in (1, 2)]
    (run / "metrics.jsonl").write_text("".join(lines))
    plan, table = check_run(run, "local")
    assert plan.workload.sequences == 32
    assert plan.workload.prompt_length == 5  # not 12: the tokens are over 32 rows, not 16
    model = run_setup(config).models["actor"]
    training = {r.name: r for r in table}["training"]
    # 32 rows of 7 tokens, the LM head at the 2 response positions and the one before.
    flops = 3 * forward_flops(model, 32 * 7, head_tokens=32 * 3)
    assert training.flops_per_s == pytest.approx(flops / 0.020)


def test_the_step_observer_logs_the_trained_batch_rows() -> None:
    from types import SimpleNamespace

    from hfsdk_planner.prediction import StepPrediction

    observer = StepPrediction(load_run_config("dpo", None, ["data.batch_size=16"]))
    view = SimpleNamespace(
        algorithm=SimpleNamespace(last_batch=[None] * 32),
        session=SimpleNamespace(worker_threads=0),
    )
    metrics = {"response_length/mean": 2.0, "perf/tokens": 32 * 7.0, "timing/step_s": 0.05}
    observer.on_step_trained(view)  # type: ignore[arg-type]
    out = observer.on_step_metrics(view, metrics)  # type: ignore[arg-type]
    assert out["perf/batch_rows"] == 32.0
    # The count is the step's own: a step whose batch is gone logs none.
    view.algorithm.last_batch = None
    observer.on_step_trained(view)  # type: ignore[arg-type]
    assert "perf/batch_rows" not in observer.on_step_metrics(view, metrics)  # type: ignore[arg-type]


def test_check_skips_validation_rows_and_never_measures_negative_generation(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_run_config("grpo").to_yaml())
    validation = {"step": 0, "timing/validation_s": 1.0, "val/reward_mean": 0.5}
    (run / "metrics.jsonl").write_text(json.dumps(validation) + "\n")
    with pytest.raises(HfsdkError, match=r"metrics\.jsonl has no steps yet"):
        check_run(run, "local")
    # A step that generated nothing but resharded (DPO) measures no generation, not < 0.
    steps = [_row(s, update_actor=0.020 * s, reshard=0.001) for s in (1, 2)]
    lines = [json.dumps(r) + "\n" for r in [validation, *steps]]
    (run / "metrics.jsonl").write_text("".join(lines))
    _, table = check_run(run, "local")
    by = {r.name: r for r in table}
    assert by["generation"].measured == 0.0
    # The validation row is no step: step 1 is the warm-up left out, step 2 is measured.
    assert by["training"].measured == pytest.approx(0.040)


def test_a_megatron_role_is_priced_at_its_tp_pp_without_fsdp_gathers() -> None:
    fsdp = load_run_config("grpo", None, ["placement.pools.global.devices=2"]).to_dict()
    megatron = json.loads(json.dumps(fsdp))
    for role in ("actor", "reference"):
        megatron[role]["backend"] = "megatron"
        megatron[role]["parallel"] = {"tp": 2, "pp": 1}
    setup = run_setup(megatron)
    assert setup.model_parallel == {"actor": (2, 1, 2), "reference": (2, 1, 2)}
    roles = {r.role: r for r in price_setup(setup, "local").roles}
    assert (roles["actor"].layout.t, roles["actor"].layout.d) == (2, 1)
    # Generation on the training shards (tp 2, no regrouping) and no FSDP gather before it.
    assert roles["actor"].generation is not None and roles["actor"].generation.tg == 2
    assert roles["actor"].transition_seconds == 0.0
    sharded = {r.role: r for r in price_setup(run_setup(fsdp), "local").roles}
    assert sharded["actor"].layout.d == 2 and sharded["actor"].transition_seconds > 0
    # A tp that does not divide the pool (refused at start) is priced as FSDP, gathers and
    # all; it was neither before (FSDP's layout without FSDP's collectives).
    for role in ("actor", "reference"):
        megatron[role]["parallel"] = {"tp": 4, "pp": 1}
    odd = {r.role: r for r in price_setup(run_setup(megatron), "local").roles}
    assert odd["actor"].layout.d == 2
    assert odd["actor"].transition_seconds == sharded["actor"].transition_seconds


def test_check_measures_a_reward_models_pass_in_the_preparation(tmp_path: Path) -> None:
    """A reward model is timed as ``timing/reward_s`` (PPO's ``stage("reward")``), as a
    function signal is: the preparation the plan prices it in must measure it too."""
    cfg = load_run_config("ppo").to_dict()
    cfg["reward"]["model"] = {"model_path": None}
    setup = run_setup(cfg)
    assert setup.functions == ()
    assert setup.scorers == ("reward",)
    prep = {s.name: s for s in setup.dataflow.stages}["preparation"]
    assert ("reward", "inference") in prep.work
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(json.dumps(cfg))
    timings = dict(
        old_log_prob=0.1, ref_log_prob=0.1, values=0.1, reward=0.5, advantages=0.01,
        update_critic=0.2, update_actor=0.3,
    )  # fmt: skip
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps(_row(s, **timings)) + "\n" for s in (1, 2))
    )
    _, table = check_run(run, "local")
    assert {r.name: r for r in table}["preparation"].measured == pytest.approx(0.1 + 0.5 + 0.01)


def test_safe_rlhf_measures_both_scorers(tmp_path: Path) -> None:
    setup = run_setup(load_run_config("safe_rlhf"))
    assert set(setup.scorers) == {"reward", "cost"}
    row = _row(1, values=0.1, reward=0.2, cost=0.3, advantages=0.01)
    assert measured_stages(row, setup.scorers)["preparation"] == pytest.approx(0.61)


def _reward_model_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_run_config("reward_model").to_yaml())
    row = {
        "response_length/mean": 2.5,
        "perf/batch_rows": 64.0,
        "perf/throughput_tokens_per_s": 64 * 8 / 0.03,
        "timing/step_s": 0.03,
        "timing/pairs_s": 0.005,
        "timing/update_score_model_s": 0.025,
    }
    lines = [json.dumps({"step": step, **row}) + "\n" for step in (1, 2)]
    (run / "metrics.jsonl").write_text("".join(lines))
    return run


def test_check_of_a_reward_model_run_prices_and_measures_its_update(tmp_path: Path) -> None:
    """A reward-model trainer has no policy: its score model is the main role, and its
    ``update_score_model`` timing is the measured training."""
    run = _reward_model_run(tmp_path)
    setup = run_setup(load_run_config("reward_model"))
    assert "reward_model" in setup.models
    _plan, table = check_run(run, "local")
    training = {r.name: r for r in table}["training"]
    assert training.measured == pytest.approx(0.025)
    assert training.predicted > 0
    assert measured_stages({"timing/update_score_model_s": 0.025})["training"] == 0.025


def test_the_step_observer_predicts_a_reward_model_step() -> None:
    from hfsdk_planner.prediction import predicted_step_metrics

    metrics = {"response_length/mean": 2.5, "perf/tokens": 64 * 8.0, "timing/step_s": 0.03}
    out = predicted_step_metrics(load_run_config("reward_model"), metrics)
    assert out["perf/predicted_step_s"] > 0


def _recorded(tmp_path: Path, config: dict, steps: int) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(json.dumps(config))
    rows = [_row(s, generation=0.01, update_actor=0.02) for s in range(1, steps + 1)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_check_header_counts_the_rollout_pools_devices(tmp_path: Path) -> None:
    run = _recorded(tmp_path, _pooled("one_step_off"), steps=3)
    plan, table = check_run(run, "local")
    assert plan.num_devices == 2  # one training device and one rollout replica
    assert "grpo on 2 x local;" in format_check(plan, table, run)


def test_check_footer_says_which_steps_were_measured(tmp_path: Path) -> None:
    config = load_run_config("grpo").to_dict()
    run = _recorded(tmp_path, config, steps=4)
    text = format_check(*check_run(run, "local"), run)
    assert "measured = mean over steps 2-4 (step 1, the warm-up, left out)" in text
    text = format_check(*check_run(run, "local", skip_first=False), run, "median")
    assert "measured = median over steps 1-4" in text
    (tmp_path / "lone").mkdir()
    lone = _recorded(tmp_path / "lone", config, steps=1)
    text = format_check(*check_run(lone, "local"), lone)
    assert "measured = step 1 alone (the run's only step, its warm-up included)" in text
    assert "after the first" not in text


def _ppo(model: str) -> list[str]:
    """PPO with ``model`` (a named size or a directory) for its actor and critic."""
    return [
        f"actor.model_path={model}",
        f"critic.model_path={model}",
        "placement.cluster=a100-80gb",
    ]


def _auto_ppo(model: str = "7B", *extra: str) -> Any:
    """A ``placement: auto`` PPO run the planner splits into an actor and a critic pool."""
    return load_run_config(
        "ppo",
        None,
        [*_ppo(model), "placement.mode=auto", "placement.pools.global.devices=16", *extra],
    )


def _as_the_session_runs(model: str = "7B", *extra: str) -> tuple[Any, dict[str, int], Any]:
    """The session's own resolution of :func:`_auto_ppo`: its placement, the planned
    rollout tp and the same run with that placement written by hand."""
    import types

    from hfsdk.core.trainer.session import TrainingSession

    holder = types.SimpleNamespace(config=_auto_ppo(model, *extra))
    placement = TrainingSession._auto_placement(holder)
    pools = ", ".join(f"{name}: {{devices: {p.devices}}}" for name, p in placement.pools.items())
    roles = ", ".join(f"{role}: {pool}" for role, pool in placement.roles.items())
    manual = load_run_config(
        "ppo",
        None,
        [*_ppo(model), f"placement.pools={{{pools}}}", f"placement.roles={{{roles}}}", *extra],
    )
    return placement, holder._planned_rollout_tp, manual


def test_auto_placement_is_priced_at_the_layout_the_session_resolves() -> None:
    placement, planned, manual = _as_the_session_runs()
    assert len(placement.pools) == 2 and planned["actor"] > 1  # not one global pool
    setup = run_setup(_auto_ppo())
    members = {name: (devices, set(roles)) for name, devices, roles in setup.pools}
    assert members == {
        name: (pool.devices, {r for r, p in placement.roles.items() if p == name})
        for name, pool in placement.pools.items()
    }
    plan = price_setup(setup)
    assert plan.iteration_seconds == pytest.approx(price_setup(run_setup(manual)).iteration_seconds)
    # The fsdp actor keeps its configured rollout tp (1): it does not take the planned one.
    actor = next(r for r in plan.roles if r.role == "actor")
    assert actor.generation is not None and actor.generation.tg == 1


def test_auto_placement_prices_the_planned_rollout_tp_megatron_takes(tmp_path: Path) -> None:
    # A 7B Llama's shape: megatron checks its heads against the tp (a named size has none).
    shape = dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                 num_key_value_heads=32, intermediate_size=11008, vocab_size=32000)  # fmt: skip
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", **shape})
    )
    model = str(tmp_path)
    # Megatron regroups its training tp (8) into the planned rollout tp (4) when that
    # divides it; without a plan it generates on its training shards.
    extra = ("actor.backend=megatron", "actor.parallel.tp=8")
    _placement, planned, manual = _as_the_session_runs(model, *extra)
    assert planned["actor"] == 4
    roles = price_setup(run_setup(_auto_ppo(model, *extra))).roles
    actor = next(r for r in roles if r.role == "actor")
    assert actor.layout.t == 8 and actor.generation is not None and actor.generation.tg == 4
    assert run_setup(manual).model_parallel["actor"] == (8, 1, 8)
    # A planned tp that is no regrouping of the training tp (4 into 2) is not taken.
    odd = run_setup(_auto_ppo(model, "actor.backend=megatron", "actor.parallel.tp=2"))
    assert odd.model_parallel["actor"] == (2, 1, 2)


def test_check_of_an_auto_run_prices_the_resolved_layout(tmp_path: Path) -> None:
    _placement, _planned, manual = _as_the_session_runs()
    plans = []
    for name, config in (("auto", _auto_ppo()), ("manual", manual)):
        (tmp_path / name).mkdir()
        plans.append(check_run(_recorded(tmp_path / name, config.to_dict(), steps=2)))
    (auto_plan, auto_table), (manual_plan, manual_table) = plans
    assert [p.name for p in auto_plan.pools] == [p.name for p in manual_plan.pools]
    assert auto_table[-1].predicted == pytest.approx(manual_table[-1].predicted)


@pytest.mark.parametrize("devices", [5, 7])
def test_auto_pools_split_each_trained_roles_mini_batch(devices: int) -> None:
    # Before: 5 devices gave the actor a pool of 5, which mini_batch_size=32 does not
    # split, so the session's own config check refused the placement auto chose.
    from hfsdk_planner.run_plan import planned_placement

    overrides = ["placement.cluster=a100-80gb"]
    config = load_run_config(
        "grpo",
        None,
        ["placement.mode=auto", *overrides, f"placement.pools.global.devices={devices}"],
    )
    section = planned_placement(config)
    mini = config.actor.mini_batch_size
    assert mini % section["pools"][section["roles"]["actor"]]["devices"] == 0
    assert sum(p["devices"] for p in section["pools"].values()) == devices
    overrides += [
        f"placement.pools.{n}.devices={p['devices']}" for n, p in section["pools"].items()
    ]
    overrides += [f"placement.roles.{r}={p}" for r, p in section["roles"].items()]
    load_run_config("grpo", None, overrides)  # the session's check accepts it


@pytest.mark.parametrize("batch", [16, 64])
def test_given_data_algorithms_price_the_old_log_prob_pass_they_run(batch: int) -> None:
    # Before: the on-policy skip rule of generating algorithms was applied to them, so
    # SFT with mini-batches below its batch got a policy forward it never runs, and DPO
    # at one mini-batch lost the one it always runs (dpo_algorithm._log_probs).
    def preparation(algo: str) -> tuple[tuple[str, str], ...]:
        config = load_run_config(algo, None, [f"data.batch_size={batch}"])
        stages = run_setup(config).dataflow.stages
        return tuple(next(s.work for s in stages if s.name == "preparation"))

    assert ("actor", "inference") not in preparation("sft")
    assert ("actor", "inference") in preparation("dpo")
    assert ("reference", "inference") in preparation("dpo")
