"""``hfsdk calibrate``: a quick calibration writes a profile the planner loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from hfsdk_planner import calibrate as calibration
from hfsdk_planner import get_cluster, plan_for_algorithm
from hfsdk_planner.cli.plan_command import calibrate_command
from hfsdk_planner.cli.plan_command import plan as plan_command
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


def test_each_thread_count_is_measured_with_that_many_threads_and_priced_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import attrs
    import torch

    from hfsdk_planner.cluster import local

    # A four-core machine; what is not per thread count is faked (measured above).
    monkeypatch.setattr(calibration, "local", lambda: attrs.evolve(local(), devices_per_node=4))
    monkeypatch.setattr(calibration, "measure_collectives", lambda *_a: None)
    monkeypatch.setattr(calibration, "measure_shared_bandwidth", lambda *_a: 40e9)
    monkeypatch.setattr(calibration, "measure_fresh_bandwidth", lambda *_a: 2e9)
    monkeypatch.setattr(calibration, "measure_calls", lambda *_a, **_k: {"call_overhead": 1e-4})
    seen: list[int] = []

    def fake_device(sizes: object, device: object, sync: object) -> tuple:
        threads = torch.get_num_threads()
        seen.append(threads)
        # Not proportional: two threads are not twice one.
        flops = {"float32": 30e9 * threads**0.8, "bfloat16": 10e9 * threads}
        model = {
            "layer_overhead": 1e-4 * threads,
            "token_overhead": 1e-6,
            "decode_step_s": {"1": 1e-3},
            **{key: 0.1 * threads for key in calibration.EFFICIENCY_KEYS},
        }
        return flops, 5e9 * threads**0.5, model

    monkeypatch.setattr(calibration, "measure_device", fake_device)
    before = torch.get_num_threads()
    cluster, raw = calibration.calibrate(quick=True)
    assert torch.get_num_threads() == before
    assert seen == [1, 2, 4] == list(calibration.calibration_threads(4))
    assert cluster.peak_flops == 30e9 and cluster.thread_counts() == (1, 2, 4)
    two, four = cluster.for_threads(2), cluster.for_threads(4)
    assert two.peak_flops == pytest.approx(30e9 * 2**0.8)
    assert dict(four.flops_by_dtype)["bfloat16"] == pytest.approx(40e9)
    assert four.memory_bandwidth == pytest.approx(10e9)
    assert dict(two.efficiency)["training_efficiency"] == pytest.approx(0.2)
    assert four.layer_overhead == pytest.approx(4e-4)
    # Three threads lie between the measured two and four.
    assert cluster.for_threads(3).peak_flops == pytest.approx(30e9 * (2**0.8 + 4**0.8) / 2)
    assert "1, 2, 4 thread(s)" in cluster.source and cluster.peaks_measured
    saved = tmp_path / "four.yaml"
    cluster.save(saved)
    assert get_cluster(str(saved)).for_threads(2) == two  # the YAML keeps every thread count
    assert set(raw["by_threads"]) == {2, 4}


def test_an_unwritable_output_stops_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def measure(**_kwargs: object) -> None:
        raise AssertionError("measured although the profile could not be saved")

    monkeypatch.setattr(calibration, "calibrate", measure)
    afile = tmp_path / "afile"
    afile.write_text("")
    result = CliRunner().invoke(calibrate_command, ["--output", str(afile / "new" / "x.yaml")])
    assert result.exit_code != 0
    assert f"{str(afile)!r} is a file, not a folder" in str(result.exception)


def test_a_device_fifo_or_empty_output_and_bad_plan_arguments_stop_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def measure(**_kwargs: object) -> None:
        raise AssertionError("measured although the command could not finish")

    monkeypatch.setattr(calibration, "calibrate", measure)
    os.mkfifo(tmp_path / "fifo.yaml")
    for output in ("", "/dev/null", str(tmp_path / "fifo.yaml")):
        # Before: measured, then renamed a new file over the device or FIFO.
        result = CliRunner().invoke(calibrate_command, ["--output", output])
        assert "not a regular file's path" in str(result.exception), output
    assert (tmp_path / "fifo.yaml").is_fifo()
    profile = str(tmp_path / "p.yaml")
    for args, said in (
        ([], "needs --algo"),
        (["--algo", "grpo", "--batch-size", "0"], "Invalid value for '--batch-size'"),
        (["--check", str(tmp_path / "none")], "the directory does not exist"),
        (["--algo", "grpo", "--cluster", "local"], "drop --cluster"),
    ):
        result = CliRunner().invoke(plan_command, ["--calibrate", profile, *args])
        assert said in str(result.exception) + result.output, args


def test_unwritable_plan_outputs_stop_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def measure(**_kwargs: object) -> None:
        raise AssertionError("measured although the plan or timeline could not be saved")

    monkeypatch.setattr(calibration, "calibrate", measure)
    afile = tmp_path / "afile"
    afile.write_text("")
    profile = str(tmp_path / "p.yaml")
    targets = [("--output", str(afile / "x.yaml")), ("--timeline", str(afile / "x.png"))]
    if Path("/proc").is_dir():  # a folder whose permission bits allow what it refuses
        targets += [("--output", "/proc/x.yaml"), ("--timeline", "/proc/x.png")]
    for option, path in targets:
        args = ["--calibrate", profile, "--algo", "grpo", option, path]
        result = CliRunner().invoke(plan_command, args)
        assert result.exit_code != 0
        assert f"cannot save the {option[2:].replace('output', 'plan')} to {path!r}" in str(
            result.exception
        ), (option, path)


def test_a_plan_that_cannot_be_saved_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk import HfsdkError
    from hfsdk_planner.plan import Plan

    def refuse(_self: Plan, _path: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Plan, "save", refuse)
    path = str(tmp_path / "plan.yaml")
    args = ["--algo", "grpo", "--model-size", "10M", "--cluster", "local", "--gpus", "1"]
    args += ["--batch-size", "8", "--prompt-length", "16", "--response-length", "16"]
    result = CliRunner().invoke(plan_command, [*args, "--output", path])
    assert isinstance(result.exception, HfsdkError)
    assert str(result.exception) == (
        f"cannot save the plan to {path!r}: No space left on device; give a path in a folder "
        "you can write"
    )
