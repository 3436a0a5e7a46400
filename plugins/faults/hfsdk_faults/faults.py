"""Fault injection for reliability tests: ``HFSDK_FAULT_INJECT=point:step[,point:step...]``.

The core and the backends call ``hfsdk.take_fault`` at named points (the
``hfsdk_fault_point`` hook, answered by :func:`fault_point`); when the environment
variable names that point and step, the process does what the point is for:
``kill`` points end the process with SIGKILL (as ``kill -9`` would, nothing is
flushed or cleaned), ``enospc`` points raise ``OSError(ENOSPC)`` as a full disk
would. Unset (the normal case) it costs one dictionary lookup.

Points: ``step_end`` (after a step's metrics line, before its checkpoint),
``save_mid`` (inside a checkpoint write, after the state files, before the
checkpoint is published), ``metrics_mid`` (half of a metrics line written),
``save_enospc`` (the checkpoint write fails with "no space left on device"),
``worker_kill`` (the controller SIGKILLs actor rank 0's worker process at the
start of the step, once per controller process: the restarted run passes it),
``rollout_kill`` (the same for rank 0 of the rollout replicas on
``placement.pools.rollout``; refused where the run has none);
``sigterm`` / ``sigint`` (the controller signals itself at the start of the
step), ``save_sigterm`` (one SIGTERM mid-checkpoint-write, where ``save_mid``
kills) and ``save_sigterm_twice`` (two SIGTERMs there), each once per process.

Weight-sync faults, each once per process, at the sync that carries the weights after
step N's update (``N = 0``: the first sync, of the initial weights): ``sync_drop`` (the
actor's sender leaves one tensor out of the stream), ``sync_stale`` (the rollout writes
what arrived into copies, so it keeps generating with the old weights) and ``sync_skip``
(the controller does not submit that sync at all). Verified syncs catch each one
(docs/async.md#verified-weight-syncs). ``slice_drop`` (the same sync, sliced replicas
``placement.pools.rollout.tp > 1``): the last tensor-parallel rank of each replica does not
write the first slice it received, so it keeps that slice's old values. ``vllm_drop``
(once per process): a vLLM engine's reload of the actor's weights version N leaves one
tensor out (the engine's read-back catches it; with a colocated actor N is the number of
updates so far; at generation tp > 1 only the last rank of each generation group loses its
slice of one tensor); ``vllm_stale`` (the reload of version N consumes the stream but never
writes the engine, which keeps its old weights: the read-back catches it) and ``vllm_skip``
(the reload of version N does not run: the engine refuses to generate from the old
version). ``lora_merge_bad`` (once per process): the first stream of a LoRA
actor's merged weights at its weights version N yields one module's base weight without its
adapter (the receiver's check of the merge against the factors' probe catches it).
``gather_drop`` (once per process): at the N-th gather (counted from 1) of a sharded actor's
own module for a colocated rollout (``rollout.weight_sync: gather``), the last rank flips
one bit of one gathered parameter after the gather (the ranks' check of the gathered
parameters against their shards' bit sums catches it).
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfsdk import StepObserver

if TYPE_CHECKING:
    from hfsdk import StepView

FAULT_ENV = "HFSDK_FAULT_INJECT"
"""The core's variable for faults (``hfsdk.core.trainer.faults``), passed on to workers."""
POINTS = (
    "step_end",
    "save_mid",
    "metrics_mid",
    "save_enospc",
    "worker_kill",
    "rollout_kill",
    "sigterm",
    "sigint",
    "save_sigterm",
    "save_sigterm_twice",
    "sync_drop",
    "sync_stale",
    "sync_skip",
    "reshard_drop",
    "vllm_drop",
    "slice_drop",
    "lora_merge_bad",
    "vllm_stale",
    "vllm_skip",
    "gather_drop",
)
_SIGNALS = {
    "sigterm": (signal.SIGTERM,),
    "sigint": (signal.SIGINT,),
    "save_sigterm": (signal.SIGTERM,),
    "save_sigterm_twice": (signal.SIGTERM, signal.SIGTERM),
}
_FIRED: set[tuple[str, int]] = set()


def _requested() -> list[tuple[str, str, str]]:
    """``HFSDK_FAULT_INJECT``'s items as ``(item, point, step)`` (the step as written)."""
    items = (i.strip() for i in os.environ.get(FAULT_ENV, "").split(","))
    parts = [(item, *item.partition(":")[::2]) for item in items if item]
    return [(item, name, at.strip()) for item, name, at in parts]


def _step_of(at: str) -> int | None:
    """An item's step as a number (``"03"`` is step 3), ``None`` where it is not one."""
    return int(at) if at.isascii() and at.isdigit() else None


def fault_requested(point: str, step: int) -> bool:
    """Whether ``HFSDK_FAULT_INJECT`` names ``point`` at ``step``."""
    return any(name == point and _step_of(at) == step for _item, name, at in _requested())


_AT_A_STEP = frozenset({"step_end", "worker_kill", "rollout_kill", "sigterm", "sigint"})
"""Points at a trained step's start or end: steps 1 to ``trainer.total_steps``."""
_AT_A_SAVE = frozenset({"save_mid", "save_enospc", "save_sigterm", "save_sigterm_twice"})
"""Points inside a checkpoint write: only trained steps (1 to ``total_steps``) are saved."""
_AT_A_SYNC = frozenset({"sync_drop", "sync_stale", "sync_skip", "slice_drop"})
"""Points at the sync after step N's update: 0 (the initial weights) to ``total_steps``."""
# The other points count what is not a step (weights versions, gathers, transitions; a step
# may make several), so the config bounds none of them and they are left unchecked.


def _unreachable(name: str, step: int, config: Any) -> str | None:
    """Why fault ``name`` at ``step`` can never fire in a run of ``config``, else ``None``.

    Bounded by ``trainer.total_steps``, not by the steps left: a resumed run numbers its
    steps on from its checkpoint, so a step past the checkpoint still comes."""
    trainer = config.trainer
    total = trainer.total_steps
    if name == "metrics_mid":
        if "jsonl" not in trainer.loggers:
            return (
                f"metrics_mid cuts a line of metrics.jsonl and trainer.loggers="
                f"[{','.join(trainer.loggers)}] writes none; add jsonl to trainer.loggers"
            )
        first = 0 if trainer.val_before_train else 1  # step 0: the validation before training
    elif name in _AT_A_SYNC:
        first = 0
    elif name in _AT_A_STEP or name in _AT_A_SAVE:
        first = 1
    else:
        return None
    if first <= step <= total:
        return _unsaved(name, step, trainer) if name in _AT_A_SAVE else None
    if step > total:
        return (
            f"{name} fires at steps up to trainer.total_steps={total}; pick a step from "
            f"{first} to {total} or raise trainer.total_steps"
        )
    if name == "metrics_mid":
        return (
            "metrics_mid at step 0 cuts the line of the validation before training, which "
            "trainer.val_before_train=false skips; set trainer.val_before_train=true or pick "
            f"a step from 1 to {total}"
        )
    return f"{name} fires at trained steps, 1 to {total}; pick a step from 1 to {total}"


def _unsaved(name: str, step: int, trainer: Any) -> str | None:
    """Why save-point fault ``name`` never fires at ``step``: no checkpoint is written there
    (the trainer saves at multiples of ``trainer.save_every`` and at ``total_steps``)."""
    every, total = trainer.save_every, trainer.total_steps
    if step == total or (every and step % every == 0):
        return None
    steps = sorted({*range(every, total + 1, every), total}) if every else [total]
    listed = ", ".join(map(str, steps[:6])) + (", ..." if len(steps) > 6 else "")
    return (
        f"{name} fires inside a checkpoint write, and trainer.save_every={every} saves "
        f"step{'s' * (len(steps) > 1)} {listed} only; pick a saved step or set "
        "trainer.save_every to one that saves it"
    )


def _no_worker_processes(point: str, step: int) -> str:
    return (
        f"{FAULT_ENV}={point}:{step} needs worker processes, but the workers run "
        "in the controller's process; set trainer.executor: ray"
    )


def _no_rollout_pool(step: int) -> str:
    return (
        f"{FAULT_ENV}=rollout_kill:{step} needs rollout replicas of their own, but this "
        "run generates in the actor's workers; set placement.pools.rollout.devices "
        "or use worker_kill"
    )


def _workers_in_process(config: Any, spec: Any) -> bool:
    """Whether the session will run the workers in the controller's process (its rule,
    ``use_local_executor``); a placement plugin's layout (``placement.mode=auto``) is not
    known before the run, so there only ``trainer.executor=local`` counts."""
    from hfsdk import ROLLOUT_POOL, local_executor_problem

    executor, placement = config.trainer.executor, config.placement
    if executor != "auto" or placement.mode == "auto":
        return executor == "local"
    pools = {
        placement.pool_of(role): None
        for role in spec.role_names  # a scorer without a model runs no worker
        if spec.kind_of(role) != "scorer" or getattr(config, role).model is not None
    }
    pools.update({ROLLOUT_POOL: None} if ROLLOUT_POOL in placement.pools else {})
    return local_executor_problem(config, placement, pools) is None


def _check_kill_targets(name: str, step: int, config: Any, spec: Any) -> None:
    """Refuse before the run the kill that step ``step`` would refuse (it has no target)."""
    from hfsdk import ROLLOUT_POOL, HfsdkError

    placement = config.placement
    if name == "worker_kill" and _workers_in_process(config, spec):
        raise HfsdkError(_no_worker_processes(name, step))
    if name == "rollout_kill" and placement.mode != "auto" and ROLLOUT_POOL not in placement.pools:
        raise HfsdkError(_no_rollout_pool(step))


def check_fault_points(config: Any = None, spec: Any = None, prepared: Any = None) -> None:
    """Refuse an ``HFSDK_FAULT_INJECT`` item that is not ``POINT:STEP`` with a known point,
    or (given the run's ``config``) one the run can never reach, such as a step past
    ``trainer.total_steps`` (the preflight check ``fault_points``): either would inject
    nothing, and the test it served would pass."""
    from hfsdk import HfsdkError

    for item, name, at in _requested():
        step = _step_of(at)
        if name not in POINTS or step is None:
            raise HfsdkError(
                f"{FAULT_ENV} has {item!r}; expected POINT:STEP (comma-separated) with a step "
                f"number and a point among {', '.join(POINTS)}; fix it or unset {FAULT_ENV}"
            )
        why = None if config is None else _unreachable(name, step, config)
        if why is not None:
            raise HfsdkError(
                f"{FAULT_ENV} has {item!r}, which this run never reaches, so it would inject "
                f"nothing: {why}, or unset {FAULT_ENV}"
            )
        if config is not None and spec is not None:
            _check_kill_targets(name, step, config, spec)


def maybe_fault(point: str, step: int) -> None:
    """Kill this process, or raise a full-disk error, when the test asked for it here."""
    if not fault_requested(point, step):
        return
    if point.endswith("enospc"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"injected at {point}:{step}")
    if point in _SIGNALS:  # what a scheduler (or Ctrl-C) does: the handlers take it from here
        if (point, step) in _FIRED:
            return
        _FIRED.add((point, step))
        for signum in _SIGNALS[point]:
            os.kill(os.getpid(), signum)
        return
    os.kill(os.getpid(), signal.SIGKILL)


def maybe_kill_worker(step: int, pid: Callable[[], int], point: str = "worker_kill") -> None:
    """``worker_kill`` (or ``point``): SIGKILL the worker process ``pid()``, the first time only."""
    if fault_requested(point, step) and (point, step) not in _FIRED:
        _FIRED.add((point, step))
        target = pid()
        if target == os.getpid():
            from hfsdk import HfsdkError

            raise HfsdkError(_no_worker_processes(point, step))
        os.kill(target, signal.SIGKILL)


def take_fault(point: str, step: int) -> bool:
    """Whether ``point`` is requested at ``step`` and has not fired in this process yet (it
    counts as fired from now): a fault a restarted component must not meet again."""
    if not fault_requested(point, step) or (point, step) in _FIRED:
        return False
    _FIRED.add((point, step))
    return True


ACTING = frozenset({"step_end", "save_mid", "save_enospc", *_SIGNALS})
"""The points whose fault this plugin makes itself (the caller only names the point)."""


def fault_point(point: str, step: int) -> bool:
    """``hfsdk_fault_point``: act at an :data:`ACTING` point (kill, raise, signal) and answer
    ``False``; elsewhere whether the caller is to make the fault (:func:`take_fault`)."""
    if point in ACTING:
        maybe_fault(point, step)
        return False
    return take_fault(point, step)


class FaultObserver(StepObserver):
    """The step-level faults: worker/rollout kills and signals at a step's start, ``step_end``
    after its metrics line."""

    def on_step_start(self, view: StepView) -> None:
        """``worker_kill``, ``rollout_kill``, ``sigterm``, ``sigint``."""
        session, step = view.session, view.step
        policy = view.spec.main_role  # the role of kind policy, whatever its name
        maybe_kill_worker(step, lambda: session.groups[policy].process_info[0]["pid"])
        if session.rollout is not None:
            maybe_kill_worker(step, lambda: session.rollout.process_info[0]["pid"], "rollout_kill")
        elif fault_requested("rollout_kill", step):
            from hfsdk import HfsdkError

            raise HfsdkError(_no_rollout_pool(step))
        maybe_fault("sigterm", step)
        maybe_fault("sigint", step)

    def on_step_logged(self, view: StepView, metrics: Mapping[str, float]) -> None:
        """``step_end``."""
        maybe_fault("step_end", view.step)


def fault_observer(config: Any, run_dir: Path) -> FaultObserver | None:
    """The fault observer when ``HFSDK_FAULT_INJECT`` is set (otherwise nothing per step)."""
    return FaultObserver() if os.environ.get(FAULT_ENV) else None
