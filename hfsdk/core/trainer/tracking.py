"""Metrics: one JSON line per step, a console progress bar, and the sinks plugins register.

``trainer.loggers`` names ``jsonl`` and ``console`` (kept here) or a sink from
``hfsdk_register_trackers`` (``tensorboard`` and ``wandb`` come with hfsdk-plugin-tracking).
"""

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
from hfsdk.core.plugin_manager import get_registry, plugin_code
from hfsdk.core.trainer.faults import take_fault
from hfsdk.core.trainer.trainer_config import BUILTIN_LOGGERS

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"

TRACKER_DISTRIBUTIONS = {"tensorboard": "hfsdk-plugin-tracking", "wandb": "hfsdk-plugin-tracking"}
"""Sinks of the default plugins -> their distribution (the line that says what to install)."""
_BAR = {"reward/mean": ("reward", ".3f"), "perf/throughput_tokens_per_s": ("tok/s", ".0f")}
"""The progress bar's metrics: key -> (label, format)."""
_SINK_FIX = "fix it or drop it from trainer.loggers, and rerun the command to resume"


def logger_problems(loggers: tuple[str, ...], trackers: Any) -> list[str]:
    """One line per name in ``trainer.loggers`` that is neither built in nor registered."""
    from hfsdk.core.cli.known_commands import missing_plugin_message

    problems = [f"'loggers' lists {n!r} {loggers.count(n)} times; list each logger once"
                for n in dict.fromkeys(loggers) if loggers.count(n) > 1]  # fmt: skip
    allowed = (*BUILTIN_LOGGERS, *trackers)
    for name in (name for name in loggers if name not in allowed):
        if name in TRACKER_DISTRIBUTIONS:
            what = f"trainer.loggers={name}"
            problems.append(missing_plugin_message(what, TRACKER_DISTRIBUTIONS[name]))
        else:
            note = getattr(trackers, "explain_missing", None)  # plugins that failed to load
            failed = note() if note else ""
            problems.append(f"'loggers' has unknown logger {name!r}; allowed: {allowed}{failed}")
    return problems


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item") and not isinstance(value, float):  # numpy and 0-d torch numbers
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else math.copysign(1e308, value)
    return value


def _from_json(value: Any) -> Any:
    """What :func:`_jsonable` wrote, back: ``null`` is NaN, ±1e308 is ±inf."""
    return math.nan if value is None else value * math.inf if value in (1e308, -1e308) else value


class Tracker:
    """Writes every step's metrics to each configured sink.

    ``jsonl`` appends to ``<run_dir>/metrics.jsonl`` and flushes each line, so a
    crashed run keeps every finished step; a resumed run (``start_step`` > 0) first
    drops the lines after its checkpoint. Other names in ``trainer.loggers`` are
    built from the ``trackers`` registry (``factory(run_dir=, config=, start_step=)``).
    """

    def __init__(
        self,
        run_dir: Path,
        loggers: tuple[str, ...],
        *,
        total_steps: int,
        start_step: int = 0,
        quiet: bool = False,
        config: Any = None,
        trackers: Any = None,
    ) -> None:
        self.run_dir = run_dir
        self._jsonl = self._bar = None
        self._sinks: list[tuple[str, str, Any]] = []  # (name, plugin, what its factory returned)
        if "jsonl" in loggers:
            path = run_dir / METRICS_FILE
            _truncate_after(path, start_step)
            self._jsonl = path.open("a")
        if "console" in loggers and not quiet:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total_steps, initial=start_step, desc="hfsdk", unit="step", file=sys.stderr
            )
        plugged = [name for name in loggers if name not in BUILTIN_LOGGERS]
        trackers = get_registry("trackers") if plugged and trackers is None else trackers
        try:
            for name, entry in ((name, trackers[name]) for name in plugged):
                with plugin_code(entry.plugin, f"logger {name!r} (start)", _SINK_FIX):
                    sink = entry.impl(run_dir=run_dir, config=config, start_step=start_step)
                self._sinks.append((name, entry.plugin, sink))
        except BaseException:  # the caller gets no Tracker, so close what was built (leaked)
            self.close()
            raise

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
            postfix = {name: format(metrics[k], f) for k, (name, f) in _BAR.items() if k in metrics}
            self._bar.set_postfix(postfix, refresh=False)
            self._bar.update(1)
        self._to_sinks(f"log step {step}", lambda sink: sink.log(step, metrics))

    def _to_sinks(self, what: str, call: Any) -> None:
        for name, plugin, sink in self._sinks:
            with plugin_code(plugin, f"logger {name!r} ({what})", _SINK_FIX):
                call(sink)  # a sink's bug or a tracking server down: named with its plugin

    def log_samples(self, step: int, samples: list[dict[str, Any]]) -> None:
        """Validation generations, for the sinks that show text (the jsonl copy is the
        trainer's ``validation/step_N.jsonl``)."""
        if not samples:
            return
        self._to_sinks(f"log step {step}'s samples", lambda sink: sink.log_samples(step, samples))

    def close(self) -> None:
        """Flush and close every sink."""
        for stream in (self._jsonl, self._bar):
            if stream is not None:
                stream.close()
        self._to_sinks("close", lambda sink: sink.close())


def read_metrics(run_dir: Path | str) -> list[dict[str, Any]]:
    """Every step's metrics from ``metrics.jsonl`` (for tests and analysis).

    A line that is not valid JSON (the half-written last line of a killed run or
    a full disk) is skipped with a warning instead of failing every later read.
    """
    path = Path(run_dir) / METRICS_FILE
    text = path.read_text(errors="replace") if path.exists() else ""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            logger.warning("%s line %d is not a complete metrics record; skipped", path, number)
            continue
        rows.append({k: _from_json(v) for k, v in row.items()})
    return rows


def _truncate_after(path: Path, step: int) -> None:
    """Keep exactly one line per step ``0..step`` (what the resumed checkpoint has seen).

    Drops lines of later steps (written after that checkpoint), damaged lines and repeated
    steps (the last copy wins), so the resumed run's lines follow without gaps or duplicates.
    """
    if not path.exists():
        return
    rows = read_metrics(path.parent) if step else []  # a new start validates step 0 again
    by_step = {row["step"]: row for row in rows if row["step"] <= step}
    lines = (json.dumps({k: _jsonable(v) for k, v in by_step[s].items()}) for s in sorted(by_step))
    write_text_atomic(path, "".join(line + "\n" for line in lines))
