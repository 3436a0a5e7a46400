"""Generation ahead of training: ``trainer.pipeline: one_step_off`` and ``async``.

Under ``sync`` (the default) none of this runs: each step generates from the
weights it then trains. Otherwise a :class:`GenerationPipeline` stands between
the trainer and its prompt stream. When the trainer draws step ``k``'s prompts,
the pipeline first makes sure generations are already submitted for the next
``depth`` steps (``one_step_off``: 1; ``async``: ``trainer.max_staleness``),
each submitted before step ``k``'s update, so it samples with the weights of
``k − 1`` updates. Step ``k + depth`` trains on it: its staleness (updates
between the sampling weights and the trained ones) is ``depth`` once the
pipeline is full and never more (the first steps' batches are fresher).

Submitting is non-blocking: the actor's worker group runs its calls in order,
so a generation submitted before an update uses the weights before it, while
the controller goes on. Where generation runs on devices of its own it
overlaps with training; on shared devices the calls take turns, which keeps
the staleness semantics (and the importance-sampling correction they need)
without the speed-up.

When the run corrects off-policy data (``algorithm.is_correction``) and the
rollout reports no ``rollout_log_probs`` of its own, the pipeline submits the
actor's ``compute_log_prob`` right behind each generation: it runs on the
same weights the generation sampled with, so those are the behaviour policy's
log-probs, taken before any later update.

Checkpoints hold the pipeline (:meth:`state_dict`): the prompts drawn ahead
and the batches generated for them, with their weight versions. A resumed run
trains on exactly those batches; the data position saved beside them is the
one after the prompts drawn ahead. Regenerating them instead would need the
older weights, which the checkpoint does not keep.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    from hfsdk.core.algorithm import Algorithm
    from hfsdk.core.algorithm_spec import AlgorithmSpec
    from hfsdk.core.batch import Batch

PIPELINES = ("sync", "one_step_off", "async")
ROLLOUT_LOG_PROBS = "rollout_log_probs"


def pipeline_depth(pipeline: str, max_staleness: int) -> int:
    """How many steps ahead generation runs: 0 (sync), 1 (one_step_off), ``max_staleness``."""
    return {"sync": 0, "one_step_off": 1, "async": max_staleness}[pipeline]


def check_pipeline(spec: AlgorithmSpec, pipeline: str) -> None:
    """Refuse a pipeline other than ``sync`` for an algorithm that needs fresh on-policy data."""
    reason = spec.on_policy_only
    if pipeline != "sync" and reason:
        raise HfsdkError(
            f"trainer.pipeline={pipeline!r}: algorithm {spec.name!r} needs fresh on-policy data "
            f"({reason}); use trainer.pipeline: sync"
        )


@attrs.define(kw_only=True)
class Ahead:
    """One step's prompts, drawn ahead, and what was submitted for them."""

    prompts: Batch
    version: int
    """Updates done when its generation was submitted (the weights it samples with)."""
    generated: Any
    """A worker-group future of the generated batch, or the batch once resolved."""
    behaviour: Any = None
    """A future (or batch) of the actor's log-probs on the sampling weights, or ``None``."""

    def resolve(self) -> None:
        """Wait for the submitted calls; keep their results."""
        if hasattr(self.generated, "result"):
            self.generated = self.generated.result()
        if self.behaviour is not None and hasattr(self.behaviour, "result"):
            self.behaviour = self.behaviour.result()


class GenerationPipeline:
    """The trainer's prompt stream with generation ``depth`` steps ahead (see module doc).

    ``next_batch()`` is the trainer's per-step draw; the algorithm's
    :meth:`~hfsdk.core.algorithm.Algorithm.generate` asks :meth:`generated`
    for the batch made ahead for those prompts (any other generation, e.g.
    greedy validation, runs as before); :meth:`step_done` counts the update.
    """

    def __init__(
        self,
        algorithm: Algorithm,
        loader: Any,
        *,
        depth: int,
        behaviour_log_probs: bool,
    ) -> None:
        if depth < 1:
            raise HfsdkError(f"a generation pipeline needs depth >= 1, got {depth}")
        self.algorithm = algorithm
        self.loader = loader
        self.depth = depth
        self.behaviour_log_probs = behaviour_log_probs
        self.version = 0
        self._queue: collections.deque[Ahead] = collections.deque()
        self._current: Ahead | None = None

    # -- the trainer's side ---------------------------------------------------------

    def next_batch(self, n: int | None = None) -> Batch:
        """This step's prompts; generation for the next ``depth`` steps is submitted first."""
        if n is not None:
            return self.loader.next_batch(n)  # a draw of its own: not pipelined
        # Always full, also near the last step: a run extended on resume then trains on the
        # batches an uninterrupted run would have (the last ``depth`` generations are spare).
        while len(self._queue) < self.depth + 1:
            self._queue.append(self._submit(self.loader.next_batch()))
        self._current = self._queue.popleft()
        return self._current.prompts

    def step_done(self) -> None:
        """The step's update is done: later submissions sample with newer weights."""
        self.version += 1

    def _submit(self, prompts: Batch) -> Ahead:
        algorithm = self.algorithm
        batch = algorithm.generation_input(prompts)
        generated = algorithm.actor.generate_sequences.submit(batch)
        behaviour = None
        if self.behaviour_log_probs:
            # Queued behind the generation, before any later update: the sampling weights.
            behaviour = algorithm.actor.compute_log_prob.submit(generated)
        return Ahead(
            prompts=prompts, version=self.version, generated=generated, behaviour=behaviour
        )

    # -- the algorithm's side -------------------------------------------------------

    def generated(self, prompts: Batch) -> tuple[Batch, dict[str, float]] | None:
        """The batch generated ahead for ``prompts`` and its staleness metrics, else ``None``."""
        head = self._current
        if head is None or prompts is not head.prompts:
            return None
        self._current = None
        head.resolve()
        out: Batch = head.generated
        if head.behaviour is not None and ROLLOUT_LOG_PROBS not in out:
            out[ROLLOUT_LOG_PROBS] = head.behaviour["old_log_probs"]
        return out, self.staleness_metrics(self.version - head.version)

    def staleness_metrics(self, staleness: int) -> dict[str, float]:
        """``async/staleness_max``/``_mean`` and the histogram share of each value 0..depth.

        Every sample of a batch comes from one weight version (no partial
        rollouts), so the histogram is one-hot per step; the run's histogram is
        the mean of these shares over steps.
        """
        metrics = {
            "async/staleness_max": float(staleness),
            "async/staleness_mean": float(staleness),
            "async/weights_version": float(self.version),
        }
        for value in range(self.depth + 1):
            metrics[f"async/staleness_hist_{value}"] = float(staleness == value)
        return metrics

    # -- checkpoints ----------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The weight version and every batch generated ahead (waits for them)."""
        for ahead in self._queue:
            ahead.resolve()
        return {
            "version": self.version,
            "depth": self.depth,
            "ahead": [
                {
                    "prompts": a.prompts,
                    "version": a.version,
                    "generated": a.generated,
                    "behaviour": a.behaviour,
                }
                for a in self._queue
            ],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (the loader's position is restored beside it)."""
        if int(state["depth"]) != self.depth:
            raise HfsdkError(
                f"the checkpoint's pipeline runs {state['depth']} step(s) ahead, this run "
                f"{self.depth}; resume with the same trainer.pipeline and trainer.max_staleness"
            )
        self.version = int(state["version"])
        self._queue = collections.deque(Ahead(**entry) for entry in state["ahead"])
        self._current = None
