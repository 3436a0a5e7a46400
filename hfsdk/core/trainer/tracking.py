"""Metrics: one JSON line per step, a console progress bar, tensorboard/wandb on request."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any

from hfsdk.core.atomic import write_text_atomic
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.faults import take_fault
from hfsdk.core.trainer.trainer_config import WandbConfig

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
WANDB_ID_FILE = "wandb_run_id"
"""The wandb run id of a run directory: a restart resumes that wandb run."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else (1e308 if value > 0 else -1e308)
    return value


class Tracker:
    """Writes every step's metrics to each configured sink.

    ``jsonl`` appends to ``<run_dir>/metrics.jsonl`` and flushes each line, so a
    crashed run keeps every finished step. Tensorboard and wandb are imported only
    when listed in ``trainer.loggers``. A resumed run (``start_step`` > 0)
    continues the same wandb run (its id is kept in the run dir) and tells
    TensorBoard to drop what the crashed run logged after the checkpoint.
    """

    def __init__(
        self,
        run_dir: Path,
        loggers: tuple[str, ...],
        *,
        total_steps: int,
        start_step: int = 0,
        quiet: bool = False,
        config: dict[str, Any] | None = None,
        wandb: WandbConfig | None = None,
    ) -> None:
        self.run_dir = run_dir
        self._jsonl = None
        self._bar = None
        self._tb = None
        self._wandb = None
        if "jsonl" in loggers:
            path = run_dir / METRICS_FILE
            _truncate_after(path, start_step)
            self._jsonl = path.open("a")
        if "console" in loggers and not quiet:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total_steps, initial=start_step, desc="hfsdk", unit="step", file=sys.stderr
            )
        if "tensorboard" in loggers:
            _require("tensorboard")
            from torch.utils.tensorboard import SummaryWriter

            # Steps after the checkpoint were logged by the run that crashed: purged on read.
            purge = start_step + 1 if start_step > 0 else None
            self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=purge)
        if "wandb" in loggers:
            _require("wandb")
            self._wandb = start_wandb(run_dir, wandb or WandbConfig(), config or {})

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` of ``step`` everywhere."""
        record = {"step": step, **{k: _jsonable(v) for k, v in sorted(metrics.items())}}
        if self._jsonl is not None:
            line = json.dumps(record) + "\n"
            if take_fault("metrics_mid", step):  # a kill half-way through the line
                self._jsonl.write(line[: len(line) // 2])
                self._jsonl.flush()
                os.kill(os.getpid(), signal.SIGKILL)  # as kill -9 would: nothing more written
            self._jsonl.write(line)
            self._jsonl.flush()
        if self._bar is not None and step > 0:  # step 0: validation before training
            postfix = {}
            if "reward/mean" in metrics:
                postfix["reward"] = f"{metrics['reward/mean']:.3f}"
            if "perf/throughput_tokens_per_s" in metrics:
                postfix["tok/s"] = f"{metrics['perf/throughput_tokens_per_s']:.0f}"
            self._bar.set_postfix(postfix, refresh=False)
            self._bar.update(1)
        if self._tb is not None:
            for key, value in metrics.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(metrics, step=step)

    def log_samples(self, step: int, samples: list[dict[str, Any]]) -> None:
        """A table of validation generations, for the loggers that show text.

        Tensorboard gets a markdown table under ``val/samples``; wandb a
        ``wandb.Table``. The jsonl copy is the trainer's ``validation/step_N.jsonl``.
        """
        if not samples:
            return
        if self._tb is not None:
            rows = ["| prompt | response | score |", "|---|---|---|"]
            for s in samples:
                cells = [str(s.get(k, "")).replace("|", "\\|").replace("\n", " ") for k in
                         ("prompt", "response")]
                rows.append(f"| {cells[0]} | {cells[1]} | {s.get('score', '')} |")
            self._tb.add_text("val/samples", "\n".join(rows), step)
        if self._wandb is not None:
            import wandb

            table = wandb.Table(columns=["prompt", "response", "score"])
            for s in samples:
                table.add_data(s.get("prompt"), s.get("response"), s.get("score"))
            self._wandb.log({"val/samples": table}, step=step)

    def close(self) -> None:
        """Flush and close every sink."""
        if self._jsonl is not None:
            self._jsonl.close()
        if self._bar is not None:
            self._bar.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def start_wandb(run_dir: Path, settings: WandbConfig, config: dict[str, Any]) -> Any:
    """``wandb.init`` for ``run_dir``: the run whose id the directory keeps, else a new one.

    Unset settings are left to wandb, which reads ``WANDB_MODE``, ``WANDB_PROJECT``,
    ``WANDB_ENTITY`` and ``WANDB_NAME``; ``WANDB_RUN_ID`` names a new run's id.
    """
    import os
    import secrets
    import string

    import wandb

    id_file = run_dir / WANDB_ID_FILE
    if id_file.is_file():
        run_id = id_file.read_text().strip()
    else:
        alphabet = string.ascii_lowercase + string.digits  # wandb's id alphabet
        run_id = os.environ.get("WANDB_RUN_ID") or "".join(
            secrets.choice(alphabet) for _ in range(8)
        )
        write_text_atomic(id_file, run_id + "\n")
    name = settings.name or os.environ.get("WANDB_NAME") or run_dir.name
    return wandb.init(
        id=run_id,
        resume="allow",
        mode=settings.mode,
        project=settings.project,
        entity=settings.entity,
        name=name,
        dir=str(run_dir),
        config=config,
    )


def _require(package: str) -> None:
    import importlib.util

    if importlib.util.find_spec(package) is None:
        raise HfsdkError(
            f"trainer.loggers asks for {package}, which is not installed; "
            f"pip install 'hfsdk[{package}]' or remove it from trainer.loggers"
        )


def read_metrics(run_dir: Path | str) -> list[dict[str, Any]]:
    """Every step's metrics from ``metrics.jsonl`` (for tests and analysis).

    A line that is not valid JSON (the half-written last line of a killed run or
    a full disk) is skipped with a warning instead of failing every later read.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            logger.warning("%s line %d is not a complete metrics record; skipped", path, number)
            continue
        rows.append(row)
    return rows


def _truncate_after(path: Path, step: int) -> None:
    """Keep exactly one line per step ``1..step`` (what the resumed checkpoint has seen).

    Drops lines of steps after ``step`` (written after that checkpoint), damaged
    lines and repeated steps (the last copy wins), so that the resumed run's
    lines follow without gaps or duplicates.
    """
    if not path.exists():
        return
    by_step: dict[int, dict[str, Any]] = {}
    for row in read_metrics(path.parent):
        if row["step"] <= step:
            by_step[row["step"]] = row
    write_text_atomic(path, "".join(json.dumps(by_step[s]) + "\n" for s in sorted(by_step)))
