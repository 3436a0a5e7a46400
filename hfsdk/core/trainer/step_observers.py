"""Step observers: features that watch the trainer's steps without living in its loop.

Plugins register factories through ``hfsdk_register_step_observers``; the
trainer builds the observers once per run (:func:`build_step_observers`) and
calls them at four points of every step (:class:`StepObserver`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import plugin_code

if TYPE_CHECKING:
    from hfsdk.core.algorithm import Algorithm
    from hfsdk.core.algorithm_spec import AlgorithmSpec
    from hfsdk.core.config.run_config import RunConfig
    from hfsdk.core.registry import Registry


@attrs.frozen(kw_only=True)
class StepView:
    """What an observer sees of one step: its number, the run and its live objects.

    ``session`` is the running :class:`~hfsdk.core.trainer.session.TrainingSession`
    (its ``groups`` by role, ``rollout`` replicas or ``None``); ``algorithm`` is the
    algorithm program (``last_batch``: the step's trained batch once trained;
    ``generations``: its sampled ``(prompts, generated)`` pairs).
    """

    step: int
    config: RunConfig
    run_dir: Path
    spec: AlgorithmSpec
    algorithm: Algorithm
    session: Any


class StopRun(HfsdkError):
    """Raised by :meth:`StepObserver.on_step_logged` to end the run after this step: the
    trainer saves the step's checkpoint, then raises it with "; checkpoint step_N saved"."""


class StepObserver:
    """Base class of step observers; override the points you need (each is a no-op here)."""

    def on_step_start(self, view: StepView) -> None:
        """Before the step draws its prompts' batch."""

    def on_step_trained(self, view: StepView) -> None:
        """After the algorithm's step (or ``rollout_only``'s generation), before validation."""

    def on_step_metrics(self, view: StepView, metrics: Mapping[str, float]) -> Mapping[str, float]:
        """Metrics to add to the step's line (``metrics`` is the line so far, read-only)."""
        return {}

    def on_step_logged(self, view: StepView, metrics: Mapping[str, float]) -> None:
        """After the step's metrics line is written, before its checkpoint (raise
        :class:`StopRun` to end the run once the step is saved)."""


class StepObservers:
    """The run's observers in name order, called together at each point; one that raises a
    bug of its own stops the run naming its plugin (``owners``: name -> plugin)."""

    def __init__(self, observers: Mapping[str, StepObserver], owners: Any = None) -> None:
        self.observers, self.owners = dict(observers), dict(owners or {})

    def __len__(self) -> int:
        return len(self.observers)

    def _call(self, name: str, method: str, *args: Any) -> Any:
        with plugin_code(self.owners.get(name, name), f"step observer {name!r} ({method})"):
            return getattr(self.observers[name], method)(*args)

    def step_start(self, view: StepView) -> None:
        """Call every observer's :meth:`StepObserver.on_step_start`."""
        for name in self.observers:
            self._call(name, "on_step_start", view)

    def step_trained(self, view: StepView) -> None:
        """Call every observer's :meth:`StepObserver.on_step_trained`."""
        for name in self.observers:
            self._call(name, "on_step_trained", view)

    def step_metrics(self, view: StepView, metrics: Mapping[str, float]) -> dict[str, float]:
        """Every observer's added metrics, merged in name order."""
        added: dict[str, float] = {}
        for name in self.observers:
            added.update(self._call(name, "on_step_metrics", view, {**metrics, **added}) or {})
        return added

    def step_logged(self, view: StepView, metrics: Mapping[str, float]) -> StopRun | None:
        """Call every observer's :meth:`StepObserver.on_step_logged`; return the first
        :class:`StopRun` raised (the others still see the step) or ``None``."""
        stop: StopRun | None = None
        for name in self.observers:
            try:
                self._call(name, "on_step_logged", view, metrics)
            except StopRun as exc:
                stop = stop or exc
        return stop


def build_step_observers(config: RunConfig, run_dir: Path, registry: Registry) -> StepObservers:
    """Call each registered factory once; keep the observers this run needs."""
    built: dict[str, StepObserver] = {}
    for name in registry:  # name order: a stable order whichever plugins are installed
        with plugin_code(registry[name].plugin, f"step observer {name!r} (factory)"):
            observer = registry[name].impl(config, run_dir)
        if observer is not None:
            built[name] = observer
    return StepObservers(built, {name: registry[name].plugin for name in built})
