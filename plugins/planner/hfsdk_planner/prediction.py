"""What the planner logs beside every step: the predicted step time
(``perf/predicted_step_s``), the threads each worker used (``perf/worker_threads``), the
rows of the trained batch (``perf/batch_rows``) and each stage's utilisation of the peaks
(:mod:`hfsdk_planner.run_utilisation`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from hfsdk import StepObserver, StepView
from hfsdk_planner.cluster import Cluster
from hfsdk_planner.cluster_lookup import resolve_cluster
from hfsdk_planner.run_plan import (
    RunSetup,
    measured_lengths,
    price_setup,
    run_hardware,
    run_setup,
    with_batch_rows,
)
from hfsdk_planner.utilisation import BATCH_ROWS

logger = logging.getLogger(__name__)


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
        self._rows = 0
        """Rows of this step's trained batch (0: none seen); the trainer drops the batch
        before the metrics are gathered, so it is counted once the step has trained."""

    def metrics(self, metrics: Mapping[str, float], threads: int = 0) -> dict[str, float]:
        """``perf/predicted_step_s`` and the stages' utilisation for one step; ``{}`` if
        the run cannot be priced.

        The step's measured lengths (``response_length/mean``, tokens per sequence)
        refine the workload; ``threads`` (> 0) are the threads each worker really
        used (the session's decision), else the planner asks the same rule. Never
        raises: a prediction must not stop a run.
        """
        if self._failed:
            return {}
        try:
            setup, cluster = self._step_setup(metrics, threads)
            out = {
                "perf/predicted_step_s": price_setup(setup, cluster).iteration_seconds,
                "perf/worker_threads": float(setup.threads),
            }
        except Exception:  # an unpriceable setup (unknown model, cluster) logs no prediction
            self._failed = self._setup is None  # the setup itself failed: do not retry each step
            return {}
        from hfsdk_planner.run_utilisation import step_utilisation

        try:
            out.update(step_utilisation(setup, run_hardware(setup, cluster), metrics))
        except Exception:  # a stage the counting cannot size loses its rates, not the step
            logger.debug("no utilisation metrics for this step", exc_info=True)
        return out

    def on_step_trained(self, view: StepView) -> None:
        """Count the trained batch's rows (DPO has two per prompt) while it is still held."""
        batch = view.algorithm.last_batch
        self._rows = len(batch) if batch is not None else 0

    def on_step_metrics(self, view: StepView, metrics: Mapping[str, float]) -> Mapping[str, float]:
        """Add the prediction, the worker threads, the batch's rows and the utilisation to
        the step's line."""
        rows, self._rows = self._rows, 0
        if rows:
            metrics = {**metrics, BATCH_ROWS: float(rows)}
        out = self.metrics(metrics, threads=int(view.session.worker_threads or 0))
        return {BATCH_ROWS: float(rows), **out} if rows else out

    def _step_setup(self, metrics: Mapping[str, float], threads: int) -> tuple[RunSetup, Cluster]:
        if self._setup is None:
            setup = run_setup(self.config)
            self._setup = (setup, resolve_cluster(setup.cluster))
        setup, cluster = self._setup
        if threads > 0:
            setup = attrs.evolve(setup, threads=threads)
        setup = with_batch_rows(setup, metrics)
        lengths = measured_lengths(metrics, setup.workload.sequences, setup.workload.packing)
        if lengths is not None:
            workload = attrs.evolve(
                setup.workload,
                prompt_length=max(1, round(lengths[0])),
                response_length=max(1, round(lengths[1])),
            )
            setup = attrs.evolve(setup, workload=workload)
        return setup, cluster


def predicted_step_metrics(config: Any, metrics: Mapping[str, float]) -> dict[str, float]:
    """One step's prediction for ``config`` without keeping anything (tests, one-off checks)."""
    return StepPrediction(config).metrics(metrics)


def prediction_observer(config: Any, run_dir: Path) -> StepPrediction:
    """The ``predicted_step`` step observer's factory: every run logs the prediction."""
    return StepPrediction(config)
