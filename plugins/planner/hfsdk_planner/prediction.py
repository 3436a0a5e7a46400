"""The predicted step time a run logs beside its measured one (``perf/predicted_step_s``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from hfsdk import StepObserver, StepView
from hfsdk_planner.cluster import Cluster
from hfsdk_planner.cluster_lookup import resolve_cluster
from hfsdk_planner.plan import Plan
from hfsdk_planner.run_plan import RunSetup, measured_lengths, price_setup, run_setup


class StepPrediction(StepObserver):
    """The step observer that prices each step of one run with the planner's simulator.

    The run's models, placement and cluster are read once, on the first step,
    and kept by this object (one per run, built by :func:`prediction_observer`),
    so two runs in one process never share or evict each other's setup.
    """

    def __init__(self, config: Any) -> None:
        self.config = config
        self._setup: tuple[RunSetup, Cluster] | None = None
        self._failed = False

    def metrics(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """``{"perf/predicted_step_s": s}`` for one step; ``{}`` if the run cannot be priced.

        The step's measured lengths (``response_length/mean``, tokens per sequence)
        refine the workload. Never raises: a prediction must not stop a run.
        """
        if self._failed:
            return {}
        try:
            return {"perf/predicted_step_s": self._plan(metrics).iteration_seconds}
        except Exception:  # an unpriceable setup (unknown model, cluster) logs no prediction
            self._failed = self._setup is None  # the setup itself failed: do not retry each step
            return {}

    def on_step_metrics(self, view: StepView, metrics: Mapping[str, float]) -> Mapping[str, float]:
        """Add ``perf/predicted_step_s`` to the step's line (``{}`` if unpriceable)."""
        return self.metrics(metrics)

    def _plan(self, metrics: Mapping[str, float]) -> Plan:
        if self._setup is None:
            setup = run_setup(self.config)
            self._setup = (setup, resolve_cluster(setup.cluster))
        setup, cluster = self._setup
        lengths = measured_lengths(metrics, setup.workload.sequences, setup.workload.packing)
        if lengths is not None:
            workload = attrs.evolve(
                setup.workload,
                prompt_length=max(1, round(lengths[0])),
                response_length=max(1, round(lengths[1])),
            )
            setup = attrs.evolve(setup, workload=workload)
        return price_setup(setup, cluster)


def predicted_step_metrics(config: Any, metrics: Mapping[str, float]) -> dict[str, float]:
    """One step's prediction for ``config`` without keeping anything (tests, one-off checks)."""
    return StepPrediction(config).metrics(metrics)


def prediction_observer(config: Any, run_dir: Path) -> StepPrediction:
    """The ``predicted_step`` step observer's factory: every run logs the prediction."""
    return StepPrediction(config)
