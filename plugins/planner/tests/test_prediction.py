"""The step observer's prediction: priced per step, its setup owned by one run."""

from __future__ import annotations

from pathlib import Path

import pytest

import hfsdk_planner.prediction as prediction
from hfsdk.core.config import load_run_config
from hfsdk_planner.prediction import StepPrediction, predicted_step_metrics


def test_every_run_can_log_the_predicted_step_time() -> None:
    cfg = load_run_config("grpo")
    metrics = {"response_length/mean": 4.0, "perf/tokens": 64 * 12.0}
    predicted = predicted_step_metrics(cfg, metrics)["perf/predicted_step_s"]
    assert predicted > 0
    longer = predicted_step_metrics(cfg, {**metrics, "perf/tokens": 64 * 40.0})
    assert longer["perf/predicted_step_s"] > predicted  # the step's lengths are priced
    assert predicted_step_metrics({"algo": "no-such-algorithm"}, metrics) == {}


def test_each_run_owns_its_setup_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = prediction.run_setup

    def counting(config: object) -> object:
        calls.append(config)
        return real(config)

    monkeypatch.setattr(prediction, "run_setup", counting)
    small = load_run_config("grpo")
    big = load_run_config("grpo", None, ["data.batch_size=64"])
    metrics = {"response_length/mean": 4.0, "perf/tokens": 64 * 12.0}
    a, b = StepPrediction(small), StepPrediction(big)
    first = [a.metrics(metrics), b.metrics(metrics), a.metrics(metrics), b.metrics(metrics)]
    # Interleaved runs neither evict nor share each other's setup: one read each.
    assert calls == [small, big]
    assert first[0] == first[2] and first[1] == first[3]
    assert first[1]["perf/predicted_step_s"] > first[0]["perf/predicted_step_s"]
    assert not [name for name in vars(prediction) if name.isupper() and "CACHE" in name]


def test_an_unpriceable_run_is_tried_once() -> None:
    observer = StepPrediction({"algo": "no-such-algorithm"})
    assert observer.metrics({}) == {} and observer.metrics({}) == {}
    assert observer._failed  # later steps do not rebuild a setup that cannot be built


def test_a_run_logs_the_predicted_step_time_beside_the_measured_one(tmp_path: Path) -> None:
    from hfsdk.core.trainer.trainer import Trainer

    small = ["data.batch_size=4", "algorithm.n_samples_per_prompt=2", "actor.mini_batch_size=8"]
    config = load_run_config(
        "grpo", None, [*small, "trainer.total_steps=1", "trainer.loggers=[jsonl]"]
    )
    (row,) = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert row["perf/predicted_step_s"] > 0 and row["timing/step_s"] > 0
    # What the trainer logged is the pricing of that step's setup and lengths.
    assert row["perf/predicted_step_s"] == pytest.approx(
        predicted_step_metrics(config, row)["perf/predicted_step_s"]
    )


def test_an_auto_placed_run_is_predicted_at_the_placement_the_session_resolves() -> None:
    import types

    from hfsdk.core.trainer.session import TrainingSession

    base = ["actor.model_path=7B", "critic.model_path=7B", "placement.cluster=a100-80gb"]
    auto = load_run_config(
        "ppo", None, [*base, "placement.mode=auto", "placement.pools.global.devices=16"]
    )
    placement = TrainingSession._auto_placement(types.SimpleNamespace(config=auto))
    pools = ", ".join(f"{name}: {{devices: {p.devices}}}" for name, p in placement.pools.items())
    roles = ", ".join(f"{role}: {pool}" for role, pool in placement.roles.items())
    manual = load_run_config(
        "ppo", None, [*base, f"placement.pools={{{pools}}}", f"placement.roles={{{roles}}}"]
    )
    metrics = {"response_length/mean": 4.0, "perf/tokens": 64 * 12.0}
    predicted = predicted_step_metrics(auto, metrics)["perf/predicted_step_s"]
    assert predicted == pytest.approx(
        predicted_step_metrics(manual, metrics)["perf/predicted_step_s"]
    )
