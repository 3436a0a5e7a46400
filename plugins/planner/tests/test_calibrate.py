"""``hfsdk calibrate``: a quick calibration writes a profile the planner loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hfsdk_planner import calibrate as calibration
from hfsdk_planner import get_cluster, plan_for_algorithm
from hfsdk_planner.cli.plan_command import calibrate_command
from hfsdk_planner.simulator import SimulatorSettings, settings_for


def test_a_quick_calibration_writes_a_profile_the_planner_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two gloo processes take long on a loaded machine; their parsing is checked below.
    links = calibration.Links(2.5e9, 1e-4, 0.5)
    monkeypatch.setattr(calibration, "measure_collectives", lambda *_a: links)
    path = tmp_path / "local.yaml"
    result = CliRunner().invoke(calibrate_command, ["--quick", "--output", str(path)])
    assert result.exit_code == 0, result.output
    assert "profile saved to" in result.output and "hfsdk decoder step" in result.output
    cluster = get_cluster(str(path))
    assert cluster.device_kind == "cpu" and "hfsdk calibrate --quick" in cluster.source
    flops = dict(cluster.flops_by_dtype)
    assert set(flops) == {"float32", "bfloat16"} and cluster.peak_flops == flops["float32"]
    assert cluster.intra_node_bandwidth == 2.5e9 and cluster.intra_node_latency == 1e-4
    assert dict(cluster.efficiency)["gather_efficiency"] == 0.5
    assert cluster.fresh_memory_bandwidth > 0  # a CPU: fresh pages are mapped on first touch
    assert cluster.layer_overhead >= 0 and cluster.call_overhead > 0
    assert cluster.decode_overlap is False  # priced the way its decode steps were fitted
    if cluster.devices_per_node > 1:  # the cores' shared memory bus was measured too
        assert cluster.shared_memory_bandwidth > 0
    settings = settings_for(cluster)
    assert settings != SimulatorSettings()  # the measured fractions, not the defaults
    for value in dict(cluster.efficiency).values():
        assert 0 < value <= 1
    plan = plan_for_algorithm(
        "grpo", model_size="50M", role_sizes={"reward": "function"}, cluster=str(path),
        num_devices=2,
    )  # fmt: skip
    assert plan.cluster == "calibrated" and plan.iteration_seconds > 0


def test_the_collective_probe_reports_bandwidth_above_latency_and_the_gathers_efficiency(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes = calibration.CalibrationSizes.quick()

    class Done:
        returncode = 0

        def __init__(self, *_a: object, **_k: object) -> None:
            pass

        def communicate(self, timeout: float) -> tuple[str, str]:
            # The gather took as long as the all-reduce: half the ring bound.
            return '{"small": 0.0001, "large": 0.0011, "gather": 0.0011}\n', ""

    import subprocess

    monkeypatch.setattr(subprocess, "Popen", Done)
    links = calibration.measure_collectives(sizes, "gloo")
    assert links is not None and links.latency == 0.0001
    assert links.bandwidth == pytest.approx(sizes.collective_bytes / 0.001)
    assert links.gather_efficiency == pytest.approx(0.5)


def test_plan_calibrate_measures_then_plans_on_the_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import attrs

    from hfsdk_planner.cli.plan_command import plan
    from hfsdk_planner.cluster import local

    measured = attrs.evolve(local(), name="measured-here", peak_flops=1e9)
    raw = {
        "seconds": 0.1,
        "matmul_flops": {"float32": 1e9},
        "memory_bandwidth": 1e9,
        "collectives": None,
        "decode_step_s": {"1": 1e-3},
        "calls": {"call_overhead": 1e-4},
    }
    monkeypatch.setattr(calibration, "calibrate", lambda **_k: (measured, raw))
    path = tmp_path / "here.yaml"
    args = ["--calibrate", str(path), "--algo", "grpo", "--model-size", "50M", "--gpus", "1"]
    result = CliRunner().invoke(plan, [*args, "--role-size", "reward=function"])
    assert result.exit_code == 0, result.output
    assert "on 1 x measured-here" in result.output
    assert get_cluster(str(path)) == measured
