"""The training backend's fixed costs: fitted from runs, counted as the simulator counts them."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from hfsdk.core.config import load_run_config
from hfsdk_planner import get_cluster
from hfsdk_planner.calibrate_backend import (
    SHAPES,
    StageSample,
    calibration_algorithm,
    fit_non_negative,
    measure_backend,
    run_overrides,
    stage_samples,
)
from hfsdk_planner.run_plan import check_run, measured_lengths, price_setup, run_setup


def test_the_fit_recovers_known_overheads_and_never_goes_negative() -> None:
    update, micro = 0.004, 0.0015
    samples = [
        StageSample(residual=c[0] * update + c[1] * micro, coefficients=c)
        for c in ((1.0, 1.0), (2.0, 8.0), (4.0, 4.0))
    ]
    assert fit_non_negative(samples) == pytest.approx((update, micro))
    # A residual that only a negative per-micro-batch cost would explain: that one is 0.
    skewed = [StageSample(residual=0.01, coefficients=(1.0, 1.0)),
              StageSample(residual=0.012, coefficients=(2.0, 8.0))]  # fmt: skip
    values = fit_non_negative(skewed)
    assert min(values) >= 0 and values[1] == 0.0
    (forward,) = fit_non_negative([StageSample(residual=0.016, coefficients=(16.0,))])
    assert forward == pytest.approx(0.001)


def _run(root: Path, overrides: list[str], rows: list[dict]) -> Path:
    run = root / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_run_config("grpo", None, overrides).to_yaml())
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _row(step: int, update: float, ref: float, old: float = 0.0) -> dict[str, float]:
    return {
        "step": step,
        "response_length/mean": 4.0,
        "perf/tokens": 16 * 12.0,
        "timing/step_s": 0.1,
        "timing/generation_s": 0.01,
        "timing/update_actor_s": update,
        "timing/ref_log_prob_s": ref,
        "timing/old_log_prob_s": old,
    }


def test_the_coefficients_are_the_steps_and_micro_batches_the_simulator_prices(
    tmp_path: Path,
) -> None:
    # Shape B: 16 sequences in mini-batches of 8 (2 updates) and micro-batches of 2 (4 each);
    # the old and reference log-probs each take 8 forward micro-batches.
    assert calibration_algorithm() == "grpo"  # the shipped plainest step
    overrides = [o for o in run_overrides("grpo", "B", 1, 3) if not o.startswith("trainer.loggers")]
    run = _run(tmp_path, overrides, [_row(i, 0.2, 0.05, 0.05) for i in (1, 2, 3)])
    base = get_cluster("local")
    samples = stage_samples(run, base)
    assert samples["training"].coefficients == pytest.approx((2.0, 8.0))
    assert samples["preparation"].coefficients == pytest.approx((16.0,))
    # Priced with the overheads that explain the residual, the stage is what was measured.
    fitted = attrs.evolve(base, update_overhead=samples["training"].residual / 2)
    _plan, table = check_run(run, fitted, statistic="median")
    assert {r.name: r for r in table}["training"].predicted == pytest.approx(0.2)


def test_a_two_device_run_fits_one_reshard_overhead_per_transition(tmp_path: Path) -> None:
    overrides = [o for o in run_overrides("grpo", "A", 2, 3) if not o.startswith("trainer.loggers")]
    rows = [{**_row(i, 0.2, 0.05), "timing/reshard_s": 0.03} for i in (1, 2, 3)]
    run = _run(tmp_path, overrides, rows)
    base = get_cluster("local")
    sample = stage_samples(run, base)["transition"]
    assert sample.coefficients == pytest.approx((1.0,))  # one transition per step
    (reshard,) = fit_non_negative([sample])
    assert reshard > 0
    _plan, table = check_run(run, attrs.evolve(base, reshard_overhead=reshard), statistic="median")
    assert {r.name: r for r in table}["transition"].predicted == pytest.approx(0.03)


def test_worker_processes_are_priced_with_the_remote_overheads() -> None:
    cfg = load_run_config("grpo", None, ["placement.pools.global.devices=2"]).to_dict()
    setup = run_setup(cfg)
    assert not setup.in_process
    base = get_cluster("local")
    local_only = attrs.evolve(base, update_overhead=1.0)
    remote = attrs.evolve(base, remote_update_overhead=1.0)
    plain = price_setup(setup, base).iteration_seconds
    assert price_setup(setup, local_only).iteration_seconds == pytest.approx(plain)
    steps = setup.workload.optimizer_steps
    assert price_setup(setup, remote).iteration_seconds == pytest.approx(plain + steps)
    one = run_setup(load_run_config("grpo").to_dict())
    assert one.in_process
    plain_one = price_setup(one, base).iteration_seconds
    assert price_setup(one, local_only).iteration_seconds == pytest.approx(plain_one + steps)


def test_passes_are_priced_over_the_padded_width_unless_packed() -> None:
    metrics = {"response_length/mean": 3.0, "perf/tokens": 10 * 9.0, "perf/sequence_width": 14.0}
    assert measured_lengths(metrics, 10) == pytest.approx((6.0, 8.0))
    assert measured_lengths(metrics, 10, packed=True) == pytest.approx((6.0, 3.0))
    del metrics["perf/sequence_width"]
    assert measured_lengths(metrics, 10) == pytest.approx((6.0, 3.0))


@pytest.mark.heavy  # a real run (~40 s); the fit itself is tested on recorded runs above
def test_a_run_of_the_real_backend_fits_its_overheads(tmp_path: Path) -> None:
    assert set(SHAPES) == {"A", "B"}
    base = get_cluster("local")
    fitted = measure_backend(base, tmp_path, remote=False, steps=3)
    assert set(fitted) == {"update_overhead", "microbatch_overhead", "forward_overhead"}
    assert all(v >= 0 for v in fitted.values())
    tuned = attrs.evolve(base, **fitted)

    def squared_error(cluster: object, stage: str) -> float:
        total = 0.0
        for shape in SHAPES:
            _plan, table = check_run(tmp_path / f"backend-{shape}-1", cluster, statistic="median")
            row = {r.name: r for r in table}[stage]
            total += (row.predicted - row.measured) ** 2
        return total

    for stage in ("training", "preparation"):
        assert squared_error(tuned, stage) <= squared_error(base, stage) + 1e-12
    for shape in SHAPES:
        rows = (tmp_path / f"backend-{shape}-1" / "metrics.jsonl").read_text().splitlines()
        assert len(rows) == 3 and "perf/sequence_width" in json.loads(rows[-1])
