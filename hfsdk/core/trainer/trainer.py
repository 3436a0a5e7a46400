"""The trainer loop: data → algorithm steps → metrics → checkpoints, with exact resume.

Nothing algorithm-specific lives here: the loop asks the algorithm for one
step at a time and records what it returns."""

from __future__ import annotations

import errno
import itertools
import json
import logging
import random
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hfsdk.core.algorithm import Algorithm, AlgorithmContext
from hfsdk.core.algorithm_spec import AlgorithmSpec
from hfsdk.core.atomic import write_text_atomic
from hfsdk.core.config.run_config import RunConfig
from hfsdk.core.determinism import disable_determinism, enable_determinism
from hfsdk.core.errors import HfsdkError
from hfsdk.core.logs import attach_run_log, detach_run_log
from hfsdk.core.rng import set_torch_rng_state, torch_rng_state
from hfsdk.core.run_spec import run_spec
from hfsdk.core.trainer.checkpoint import clean_partial, latest_checkpoint, write_checkpoint
from hfsdk.core.trainer.run_directory import CONFIG_FILE, TRAINER_STATE, RunDirectory
from hfsdk.core.trainer.step_observers import StepObservers, StepView, build_step_observers
from hfsdk.core.trainer.stopping import RunStopped, StopNow, StopSignals, signal_name
from hfsdk.core.trainer.tracking import Tracker, read_metrics

logger = logging.getLogger(__name__)

EXPORT_REQUEST = "EXPORT_HF"
"""``touch <run_dir>/EXPORT_HF``: the next checkpoint also exports the actor in HF format."""


def default_run_dir(algo: str) -> Path:
    """``runs/<algo>-<UTC timestamp>``."""
    return Path("runs") / f"{algo}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def create_default_run_dir(algo: str) -> RunDirectory:
    """A new :func:`default_run_dir`, created and locked; ``-2``, ``-3`` ... appended when a run
    started in the same second has it (its lock decides a tie, so no two runs share one)."""
    base = default_run_dir(algo)
    for n in itertools.count(1):
        path = base.with_name(f"{base.name}-{n}") if n > 1 else base
        try:  # (an existing one is another run's, running or done: never resumed by accident)
            if not path.exists():
                (directory := RunDirectory(path)).create_and_lock()
                return directory
        except HfsdkError:
            if not path.is_dir():  # it could not be created: no other name would do better
                raise
    raise AssertionError("unreachable")


def _rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch_rng_state()}


def _set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    set_torch_rng_state(state["torch"])


# "unexpected pos": what torch 2.13's zip writer raises when a write to a full disk fell short.
_NO_SPACE_SIGNS = ("No space left", "ENOSPC", "file write failed", "Disk quota", "unexpected pos")


def _is_no_space(exc: BaseException) -> bool:
    """A full disk, raised here (``OSError``) or inside a worker / torch's writer (text only)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return any(sign in str(exc) for sign in _NO_SPACE_SIGNS)


def _first_line(text: object) -> str:
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""


class Trainer:
    """Runs one algorithm on one run directory; resumes from its newest usable checkpoint.

    Construction checks everything that needs no Ray (config, assets, data,
    reward functions, the Ray address, the run directory and its checkpoints)
    and takes the run directory's lock; a run directory is created only once
    those checks pass, so bad input leaves nothing behind."""

    def __init__(
        self, config: RunConfig, run_dir: str | Path | None = None, *, quiet: bool = False
    ):
        from hfsdk.core.trainer.preflight import prepare_run
        from hfsdk.core.trainer.run_assets import with_signals

        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir(config.algo)
        self.quiet = quiet
        self.spec: AlgorithmSpec = run_spec(config)
        self.directory = RunDirectory(self.run_dir)
        self._candidates: Iterator[tuple[int, Path, dict[str, Any]]] = iter(())
        self.resume_from: tuple[int, Path] | None = None
        self.restarts = 0
        self._pipeline: Any = None  # trainer.pipeline's GenerationSource, per attempt
        self._keep_best_seen: set[str] | None = set()  # metrics so far; None once it is found
        self._observers = StepObservers({})
        self.directory.check_path()
        try:
            if run_dir is not None:  # refuse a concurrent run before any heavy work
                self.directory.lock_if_present()
            self.prepared = prepare_run(config, self.spec)
            self._data_start = self.prepared.loader.state_dict()  # each attempt starts here
            # What really scores the run (the default task's functions when the config names
            # none) is what the run directory's config.yaml shows and a resume compares.
            given_config = config
            self.config = config = with_signals(config, self.prepared.signal_configs)
            if run_dir is None:  # named only now, so bad input leaves none behind
                self.directory = create_default_run_dir(config.algo)
            self.directory.create_and_lock()  # (a no-op when held)
            self.run_dir = self.directory.path
            for done in clean_partial(self.run_dir):
                logger.warning("checkpoints: %s (left by an interrupted save)", done)
            self.directory.check_config_matches(config, given=given_config)
            if config.trainer.resume:  # (the newest usable one now; older ones when drawn)
                first = next(candidates := self.directory.usable_checkpoints(), None)
                self._candidates = itertools.chain([first] if first else [], candidates)
                self.resume_from = first[:2] if first else None
            elif old := latest_checkpoint(self.run_dir):  # a restart or export would take it
                raise HfsdkError(
                    f"run directory {str(self.run_dir)!r} holds checkpoints of an earlier run "
                    f"(newest step_{old[0]}) and trainer.resume=false; pass a new --run-dir (or "
                    "remove its checkpoints/) to start over, or set trainer.resume=true"
                )
            done = self.resume_from[0] if self.resume_from else 0
            if done >= config.trainer.total_steps:  # its config.yaml stays the one it ran
                logger.warning("the run is at step %d, trainer.total_steps=%d: nothing to train",
                               done, config.trainer.total_steps)  # fmt: skip
            else:
                write_text_atomic(self.run_dir / CONFIG_FILE, config.to_yaml())
            attach_run_log(self.run_dir)
        except BaseException:
            self._abandon()
            raise

    def _abandon(self) -> None:
        detach_run_log()
        self.directory.abandon()

    def close(self) -> None:
        """Release the run directory (:meth:`fit` does this itself)."""
        detach_run_log()
        self.directory.release()

    def __del__(self) -> None:
        if (directory := getattr(self, "directory", None)) is not None:
            directory.release()

    def fit(self) -> list[dict[str, Any]]:
        """Train until ``trainer.total_steps``; return every step's metrics of this run dir
        (none without the jsonl logger: metrics.jsonl holds them).

        A worker that dies or misses its call deadline ends the attempt: the worker
        groups and their placement groups are torn down, started again and the run
        resumes from the newest complete checkpoint, up to ``trainer.max_restarts`` times.
        A rollout replica on a pool of its own that dies or hangs is restarted alone
        instead (:meth:`_restart_rollout`): the trainer and its workers keep their state.
        Both kinds of restart count toward the same limit."""
        from hfsdk.core.workers.errors import WorkerDiedError, WorkerError, WorkerTimeoutError

        self.restarts = 0
        self._stop = StopSignals(self.config.trainer.stop_grace_s)
        self._stop.install()
        try:
            while True:
                try:
                    self._attempt()
                    break
                except (StopNow, SystemError) as exc:  # Ray's waits wrap StopNow in SystemError
                    stop = exc.__cause__ if isinstance(exc, SystemError) else exc
                    if not isinstance(stop, StopNow):
                        raise
                    self._stop.on_abandon()
                    raise self._stopped(abandoned=str(stop)) from None
                except (WorkerDiedError, WorkerTimeoutError) as exc:
                    if self._stop.requested:  # e.g. the scheduler signalled the workers too
                        raise self._stopped(abandoned=_first_line(exc)) from exc
                    if not self._take_restart(exc, "worker", "from the newest checkpoint"):
                        raise WorkerError(
                            f"{_first_line(exc)} (gave up after {self.restarts} restart(s); "
                            f"trainer.max_restarts={self.config.trainer.max_restarts})",
                            role=exc.role,
                            rank=exc.rank,
                            method=exc.method,
                        ) from exc
                    self._candidates = self.directory.usable_checkpoints()
        except BaseException:
            self._abandon()
            raise
        finally:
            self._stop.uninstall()
            if self.config.trainer.deterministic:
                disable_determinism()  # the controller's process goes on (tests, notebooks)
        detach_run_log()
        self.directory.release()
        return read_metrics(self.run_dir) if "jsonl" in self.config.trainer.loggers else []

    def _stopped(self, *, abandoned: str | None = None, saved: int | None = None) -> RunStopped:
        """The one-line :class:`RunStopped` for the signal that arrived."""
        stop = self._stop
        signum = stop.signum or 15
        name = signal_name(signum)
        newest = latest_checkpoint(self.run_dir)
        if saved is not None:
            what = f"at step {saved}: checkpoint step_{saved} written"
        elif abandoned is not None:
            kept = f"the newest checkpoint is step_{newest[0]}" if newest else "no checkpoint yet"
            what = f"during step {stop.step} ({abandoned}): the step was abandoned, {kept}"
        elif newest is not None:
            what = f"before step {stop.step}: checkpoint step_{newest[0]} holds every step done"
        else:
            what = "before the first step: nothing to save"
        return RunStopped(
            f"stopped by {name} {what}; rerun the same command to resume", signum=signum, step=saved
        )

    def _attempt(self) -> None:
        """One session: start the workers, resume, train to the end."""
        from hfsdk.core.plugin_manager import get_registry
        from hfsdk.core.trainer.session import TrainingSession

        cfg = self.config
        if cfg.trainer.deterministic:
            enable_determinism()  # the controller, and the workers when they share its process
        random.seed(cfg.trainer.seed)
        np.random.seed(cfg.trainer.seed)
        torch.manual_seed(cfg.trainer.seed)
        self.prepared.loader.load_state_dict(self._data_start)
        spec = self.spec
        with TrainingSession(cfg, spec, prepared=self.prepared) as session:
            self._stop.install()  # again: starting Ray installs its own SIGTERM handler
            context = AlgorithmContext(
                config=cfg,
                roles=session.roles,
                signals=session.signals,
                spec=spec,
                prompts=session.loader,  # the stream the checkpoint's data position tracks
                tokenizer=self.prepared.tokenizer,
                clock=session.clock,
            )
            algorithm: Algorithm = spec.program(context)
            self._observers = build_step_observers(
                cfg, self.run_dir, get_registry("step_observers")
            )
            self._pipeline = self._build_pipeline(algorithm, session.loader, session)
            context.pipeline = self._pipeline
            if cfg.trainer.mode == "train_only":  # its draws too come from the dumped run
                context.prompts = self._pipeline
            start = self._resume(session, algorithm)
            tracker = Tracker(
                self.run_dir,
                tuple(cfg.trainer.loggers),
                total_steps=cfg.trainer.total_steps,
                start_step=start,
                quiet=self.quiet,
                config=cfg,
            )
            self._saved_step = start
            done = start
            try:
                if start == 0 and cfg.trainer.val_before_train:
                    self._validate(session, algorithm, tracker, 0)
                for step in range(start + 1, cfg.trainer.total_steps + 1):
                    self._stop.step = step
                    if self._stop.requested:
                        break
                    self._one_step(session, algorithm, tracker, step)
                    done = step
            finally:
                tracker.close()
            if self._stop.requested and done == cfg.trainer.total_steps:  # the run completed
                self._stop.disarm()  # tear-down may take its time
            elif self._stop.requested:
                if done == start:  # no step trained in this session: nothing new to save
                    self._stop.disarm()
                    raise self._stopped()
                # The run's last checkpoint holds the HF export under hf_export: end too; a
                # regular save of this very step (save_every) did not export, so it is redone.
                if self._saved_step != done or not self._has_hf_export(done):
                    self._save(session, algorithm, done, last=True)
                self._stop.disarm()  # what the grace was for is done; tear-down may take its time
                raise self._stopped(saved=done)

    def _build_pipeline(self, algorithm: Algorithm, loader: Any, session: Any = None) -> Any:
        """The generation pipeline of ``trainer.pipeline`` (``None`` under ``sync`` unless the
        rollout has a pool of its own, ``session.rollout``)."""
        from hfsdk.core.plugin_manager import get_plugin_manager
        from hfsdk.core.trainer.preflight import PIPELINES

        trainer = self.config.trainer
        if trainer.mode == "train_only":  # a plugin reads the generations (checked in preflight)
            source = get_plugin_manager().hook.hfsdk_recorded_generations(config=self.config)
            if source is None:
                raise HfsdkError(
                    f"trainer.mode=train_only: no plugin reads trainer.rollouts_from="
                    f"{trainer.rollouts_from!r} (every hfsdk_recorded_generations answered "
                    "None); pass the run directory of a run made with trainer.rollout_dump: true"
                )
            return source
        rollout = session.rollout if session is not None else None
        if trainer.pipeline == "sync" and rollout is None:
            return None
        pipeline = get_plugin_manager().hook.hfsdk_build_generation_pipeline(
            algorithm=algorithm,
            loader=loader,
            config=self.config,
            rollout=rollout,
            restart_rollout=(
                (lambda exc: self._restart_rollout(session, exc)) if rollout is not None else None
            ),
        )
        if pipeline is None:  # with no plugin at all, preflight refused the run already
            raise HfsdkError(
                f"trainer.pipeline={trainer.pipeline!r}: every hfsdk_build_generation_pipeline "
                f"answered None; install {PIPELINES} or enable its plugin"
            )
        return pipeline

    def _take_restart(self, exc: BaseException, what: str, how: str) -> bool:
        """Count one restart and say so, or ``False`` when ``trainer.max_restarts`` are used."""
        limit = self.config.trainer.max_restarts
        if self.restarts >= limit:
            return False
        self.restarts += 1
        logger.warning(
            "%s failure: %s; restart %d of %d %s", what, _first_line(exc), self.restarts, limit, how
        )
        return True

    def _restart_rollout(self, session: Any, exc: BaseException) -> Any:
        """A fresh rollout replica group in place of one that failed (counts as a restart;
        with none left ``exc`` goes on to :meth:`fit`, which gives up)."""
        how = "of the rollout pool alone (the trainer and its workers keep their state)"
        if not self._take_restart(exc, "rollout replica", how):
            raise exc
        return session.restart_rollout()

    def _one_step(self, session: Any, algorithm: Algorithm, tracker: Tracker, step: int) -> None:
        cfg = self.config
        view = StepView(
            step=step,
            config=cfg,
            run_dir=self.run_dir,
            spec=self.spec,
            algorithm=algorithm,
            session=session,
        )
        observers: StepObservers = self._observers
        session.clock.take()  # calls before this step (set-up, checkpoints) are not its overhead
        started = time.perf_counter()
        source = self._pipeline if self._pipeline is not None else session.loader
        with algorithm.stage("data"):
            prompts = source.next_batch()
        observers.step_start(view)
        algorithm.generations = []
        if cfg.trainer.mode == "rollout_only":
            metrics = self._rollout_only_step(session, algorithm, prompts)
        else:
            metrics = algorithm.step(prompts)
        observers.step_trained(view)
        algorithm.last_batch, algorithm.generations = None, []
        if self._pipeline is not None:
            self._pipeline.step_done()
        if cfg.trainer.val_every and step % cfg.trainer.val_every == 0:
            metrics.update(self._validation_metrics(session, algorithm, tracker, step))
        step_s = time.perf_counter() - started
        metrics["timing/step_s"] = step_s
        # What the controller added to its blocking worker calls: dispatch, serialization,
        # transfers, collect (the calls' wall time minus their slowest rank's method time).
        calls_s, busy_s, calls = session.clock.take()
        metrics["perf/worker_calls"] = float(calls)
        metrics["perf/controller_overhead_s"] = calls_s - busy_s
        metrics["perf/controller_overhead_share"] = (calls_s - busy_s) / step_s if step_s else 0.0
        tokens = metrics.pop("perf/tokens", 0.0)
        trained_s = step_s - metrics.get("timing/validation_s", 0.0)  # validation trains none
        metrics["perf/throughput_tokens_per_s"] = tokens / trained_s if trained_s > 0 else 0.0
        metrics.update(observers.step_metrics(view, {**metrics, "perf/tokens": tokens}))
        tracker.log(step, metrics)
        stop = observers.step_logged(view, metrics)
        last = step == cfg.trainer.total_steps
        saving = last or bool(cfg.trainer.save_every and step % cfg.trainer.save_every == 0)
        self._check_keep_best(metrics, saving=saving or stop is not None)
        if saving or stop is not None:  # a stop's checkpoint is the run's last: it exports
            self._save(session, algorithm, step, last=stop is not None)
        if stop is not None:
            raise type(stop)(f"{stop}; checkpoint step_{step} saved")

    def _check_keep_best(self, metrics: dict, *, saving: bool) -> None:
        """At the first checkpoint: has ``trainer.keep_best``'s metric been reported? Checked
        against every metric so far (some appear only after a warm-up), once a validation has
        run for a ``val/`` metric."""
        metric, seen = self.config.trainer.keep_best, self._keep_best_seen
        if not metric or seen is None:
            return
        seen.update(metrics)
        if metric in seen:
            self._keep_best_seen = None
            return
        validated = any(k.startswith("val/") for k in seen)
        if not saving or (metric.startswith("val/") and not validated):
            return
        from hfsdk.core.trainer.input_checks import check_keep_best_reported

        check_keep_best_reported(metric, seen)

    @staticmethod
    def _rollout_only_step(session: Any, algorithm: Algorithm, prompts: Any) -> dict[str, float]:
        """``trainer.mode: rollout_only``: generate and score with every signal, no update."""
        with algorithm.stage("generation"):
            batch = algorithm.generate(prompts)
        with algorithm.stage("reward"):
            for signal in session.signals:
                key = "token_level_scores" if signal == "reward" else f"token_level_{signal}s"
                batch[key] = algorithm.score(batch, signal)
        return algorithm.finish(batch)

    def _validation_metrics(
        self, session: Any, algorithm: Algorithm, tracker: Tracker, step: int
    ) -> dict:
        """Validate; the samples go to ``validation/step_N.jsonl`` (atomically) and the loggers."""
        started = time.perf_counter()
        result = session.validate(algorithm)
        if result is None:
            return {}
        if result.samples:
            lines = "".join(json.dumps(s) + "\n" for s in result.samples)
            (self.run_dir / "validation").mkdir(exist_ok=True)
            write_text_atomic(self.run_dir / "validation" / f"step_{step}.jsonl", lines)
            tracker.log_samples(step, result.samples)
        return {**result.metrics, "timing/validation_s": time.perf_counter() - started}

    def _validate(self, session: Any, algorithm: Algorithm, tracker: Tracker, step: int) -> None:
        """Validation alone, logged as its own step (``trainer.val_before_train``: step 0)."""
        metrics = self._validation_metrics(session, algorithm, tracker, step)
        if metrics:
            tracker.log(step, metrics)

    def _has_hf_export(self, step: int) -> bool:
        """Whether checkpoint ``step_<step>`` holds the run's model in HF format."""
        role = self.spec.main_role  # a reward model's run has no policy
        return (self.run_dir / "checkpoints" / f"step_{step}" / f"{role}_hf").is_dir()

    def _save(self, session: Any, algorithm: Algorithm, step: int, *, last: bool = False) -> None:
        """Checkpoint ``step``; ``last``: the run stops after it (a signal), so under
        ``trainer.hf_export: end`` it is the run's last checkpoint and exports too."""
        request = self.run_dir / EXPORT_REQUEST
        export_hf = (
            self.config.trainer.hf_export == "every_save"
            or step == self.config.trainer.total_steps
            or last
            or request.exists()
        )

        def save(directory: Path) -> None:
            # Taken before the workers save: in-process workers share this RNG, and saving
            # may draw from it (an HF export may build a model); resuming restores it
            # last, so it must be the state an unsaved run continues from.
            rng = _rng_state()
            session.save_workers(directory, export_hf=export_hf)
            state = {
                "step": step,
                "data": session.loader.state_dict(),
                "algorithm": algorithm.state_dict(),
                "rng": rng,
            }
            if self._pipeline is not None:  # the batches generated ahead (docs/async.md)
                state["pipeline"] = self._pipeline.state_dict()
            torch.save(state, directory / TRAINER_STATE)

        try:
            path = write_checkpoint(self.run_dir, step, save)
        except Exception as exc:
            if not _is_no_space(exc):
                raise
            previous = latest_checkpoint(self.run_dir)
            resume = f"step_{previous[0]}" if previous else "the start"
            raise HfsdkError(
                f"no space left on the device of {str(self.run_dir)!r} while writing checkpoint "
                f"step_{step} (nothing half-written was kept); free space or use a --run-dir on "
                f"a larger disk, then rerun the same command to resume from {resume}"
            ) from exc
        self._saved_step = step
        request.unlink(missing_ok=True)  # a requested export is done once
        logger.info("checkpoint written to %s", path)
        trainer = self.config.trainer
        if trainer.keep_last:
            from hfsdk.core.trainer.retention import prune_checkpoints

            rows = read_metrics(self.run_dir)
            prune_checkpoints(self.run_dir, rows, trainer.keep_last, trainer.keep_best, step)

    def _resume(self, session: Any, algorithm: Algorithm) -> int:
        """Load the newest checkpoint the workers accept; 0 when starting fresh."""
        from hfsdk.core.workers.errors import WorkerDiedError, WorkerError

        candidate = next(self._candidates, None)
        while candidate is not None:
            step, path, state = candidate
            try:
                session.load_workers(path)
            except WorkerDiedError:
                raise
            except (WorkerError, HfsdkError) as exc:
                if (candidate := next(self._candidates, None)) is None:
                    raise HfsdkError(
                        f"no usable checkpoint in {str(self.run_dir)!r}: step_{step} could not be "
                        f"loaded ({_first_line(exc)}); restore it (or the model it was trained "
                        f"from), or remove {str(self.run_dir / 'checkpoints')!r} to start over"
                    ) from None
                logger.warning(
                    "checkpoint step_%d could not be loaded (%s); trying an older one",
                    step,
                    _first_line(exc),
                )
                continue
            session.loader.load_state_dict(state["data"])
            algorithm.load_state_dict(state["algorithm"])
            if self._pipeline is not None:
                self._pipeline.load_state_dict(state["pipeline"])
            _set_rng_state(state["rng"])
            self.resume_from = (step, path)
            logger.warning("resuming from %s (step %d)", path, step)  # --quiet too: a resume
            return int(state["step"])
        return 0


def run_training(
    config: RunConfig, run_dir: str | Path | None = None, *, quiet: bool = False
) -> list[dict[str, Any]]:
    """Train ``config`` in ``run_dir`` (resuming if it has a checkpoint); return the metrics."""
    return Trainer(config, run_dir, quiet=quiet).fit()
