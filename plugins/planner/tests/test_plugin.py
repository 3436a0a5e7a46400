"""What the planner contributes, and that the core holds none of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import get_registry
from hfsdk.core.config import load_run_config
from hfsdk_planner.memory_check import memory_preflight
from hfsdk_planner.prediction import StepPrediction


def test_the_planner_registers_its_observer_check_presets_and_commands() -> None:
    assert get_registry("step_observers")["predicted_step"].plugin == "planner"
    assert get_registry("preflight_checks")["run_memory"].plugin == "planner"
    clusters = get_registry("clusters")
    assert {clusters[n].plugin for n in ("a100-80gb", "h100-80gb", "h200-141gb", "local")} == {
        "planner"
    }
    from hfsdk.core.cli.main import build_cli

    assert {"plan", "calibrate", "plot"} <= set(build_cli().commands)


def test_the_observer_factory_builds_one_prediction_per_run(tmp_path: Path) -> None:
    factory = get_registry("step_observers")["predicted_step"].impl
    config = load_run_config("grpo")
    first, second = factory(config, tmp_path), factory(config, tmp_path)
    assert isinstance(first, StepPrediction) and first is not second


def test_the_memory_check_warns_when_the_run_does_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    import hfsdk_planner.memory_check as memory_check

    config = load_run_config("grpo")
    monkeypatch.setattr(memory_check, "host_memory_bytes", lambda: 1.0)  # one byte free
    line = memory_preflight(config, None, None)
    assert line is not None and "\n" not in line
    monkeypatch.setattr(memory_check, "host_memory_bytes", lambda: 1e15)
    assert memory_preflight(config, None, None) is None


def test_the_core_holds_no_planner() -> None:
    core = Path(__file__).resolve().parents[3] / "hfsdk" / "core"
    assert not (core / "placement").exists() and not (core / "hybrid_engine").exists()
    assert not (core / "cli" / "plan_command.py").exists()
