"""The trainer loop: data → algorithm steps → metrics → checkpoints, with exact resume.

Nothing algorithm-specific lives here: the loop asks the algorithm for one
step at a time and records what it returns.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from hfsdk.core.algorithm import Algorithm, AlgorithmContext
from hfsdk.core.config.run_config import RunConfig
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.checkpoint import latest_checkpoint, write_checkpoint
from hfsdk.core.trainer.tracking import Tracker, read_metrics

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
TRAINER_STATE = "trainer_state.pt"
# Keys a resumed run may change without invalidating its checkpoints.
_RESUMABLE_CHANGES = {("trainer", "total_steps"), ("trainer", "save_every"), ("trainer", "loggers")}


def default_run_dir(algo: str) -> Path:
    """``runs/<algo>-<UTC timestamp>``."""
    return Path("runs") / f"{algo}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], prefix: tuple = ()) -> list:
    keys = set(old) | set(new)
    out = []
    for key in sorted(keys, key=str):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out.extend(_differences(a, b, (*prefix, key)))
        elif a != b:
            out.append((*prefix, key))
    return out


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _rng_state() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }


def _set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


class Trainer:
    """Runs one algorithm on one run directory; resumes from its newest checkpoint."""

    def __init__(
        self, config: RunConfig, run_dir: str | Path | None = None, *, quiet: bool = False
    ):
        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir(config.algo)
        self.quiet = quiet
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.resume_from = latest_checkpoint(self.run_dir) if config.trainer.resume else None
        self._check_config_matches()
        _write_atomic(self.run_dir / CONFIG_FILE, config.to_yaml())

    def _check_config_matches(self) -> None:
        path = self.run_dir / CONFIG_FILE
        if self.resume_from is None or not path.exists():
            return
        old = yaml.safe_load(path.read_text()) or {}
        changed = [
            ".".join(map(str, key))
            for key in _differences(old, self.config.to_dict())
            if tuple(key) not in _RESUMABLE_CHANGES
        ]
        if changed:
            raise HfsdkError(
                f"run directory {str(self.run_dir)!r} holds a checkpoint of a run with a different "
                f"config ({', '.join(changed[:6])} changed); resume with the same config or pass "
                "a new --run-dir"
            )

    def fit(self) -> list[dict[str, Any]]:
        """Train until ``trainer.total_steps``; return every step's metrics of this run dir."""
        from hfsdk.core.registry import get_registry
        from hfsdk.core.trainer.session import TrainingSession

        cfg = self.config
        random.seed(cfg.trainer.seed)
        np.random.seed(cfg.trainer.seed)
        torch.manual_seed(cfg.trainer.seed)

        algo_cls: type[Algorithm] = get_registry("algorithms")[cfg.algo].impl
        with TrainingSession(cfg, algo_cls.roles) as session:
            algorithm = algo_cls(
                AlgorithmContext(config=cfg, roles=session.roles, signals=session.signals)
            )
            start = 0
            if self.resume_from is not None:
                start = self._load(session, algorithm, *self.resume_from)
            tracker = Tracker(
                self.run_dir,
                tuple(cfg.trainer.loggers),
                total_steps=cfg.trainer.total_steps,
                start_step=start,
                quiet=self.quiet,
                config=cfg.to_dict(),
            )
            try:
                for step in range(start + 1, cfg.trainer.total_steps + 1):
                    self._one_step(session, algorithm, tracker, step)
            finally:
                tracker.close()
        return read_metrics(self.run_dir)

    def _one_step(self, session: Any, algorithm: Algorithm, tracker: Tracker, step: int) -> None:
        from hfsdk.core.workers.futures import CALL_CLOCK

        cfg = self.config
        CALL_CLOCK.take()  # calls before this step (set-up, checkpoints) are not its overhead
        started = time.perf_counter()
        with algorithm.stage("data"):
            prompts = session.loader.next_batch()
        metrics = algorithm.step(prompts)
        if cfg.trainer.val_every and step % cfg.trainer.val_every == 0:
            metrics.update(session.validate(algorithm))
        step_s = time.perf_counter() - started
        metrics["timing/step_s"] = step_s
        # What the controller added to its blocking worker calls: dispatch, serialization,
        # transfers, collect (the calls' wall time minus their slowest rank's method time).
        calls_s, busy_s, calls = CALL_CLOCK.take()
        metrics["perf/worker_calls"] = float(calls)
        metrics["perf/controller_overhead_s"] = calls_s - busy_s
        metrics["perf/controller_overhead_share"] = (calls_s - busy_s) / step_s if step_s else 0.0
        tokens = metrics.pop("perf/tokens", 0.0)
        metrics["perf/throughput_tokens_per_s"] = tokens / step_s if step_s > 0 else 0.0
        tracker.log(step, metrics)
        last = step == cfg.trainer.total_steps
        if last or (cfg.trainer.save_every and step % cfg.trainer.save_every == 0):
            self._save(session, algorithm, step)

    def _save(self, session: Any, algorithm: Algorithm, step: int) -> None:
        def save(directory: Path) -> None:
            session.save_workers(directory)
            state = {
                "step": step,
                "data": session.loader.state_dict(),
                "algorithm": algorithm.state_dict(),
                "rng": _rng_state(),
            }
            torch.save(state, directory / TRAINER_STATE)

        path = write_checkpoint(self.run_dir, step, save)
        logger.info("checkpoint written to %s", path)

    def _load(self, session: Any, algorithm: Algorithm, step: int, path: Path) -> int:
        state = torch.load(path / TRAINER_STATE, weights_only=False)
        session.load_workers(path)
        session.loader.load_state_dict(state["data"])
        algorithm.load_state_dict(state["algorithm"])
        _set_rng_state(state["rng"])
        if not self.quiet:
            logger.warning("resuming from %s (step %d)", path, step)
        return int(state["step"])


def run_training(
    config: RunConfig, run_dir: str | Path | None = None, *, quiet: bool = False
) -> list[dict[str, Any]]:
    """Train ``config`` in ``run_dir`` (resuming if it has a checkpoint); return the metrics."""
    return Trainer(config, run_dir, quiet=quiet).fit()
