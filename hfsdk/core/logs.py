"""Logging for the ``hfsdk`` command, its run directory and its worker processes.

One handler on the root logger writes hfsdk's own records (loggers named
``hfsdk…``, plugins' ``hfsdk_…`` included) from ``--log-level`` up (default
``info``) and everyone else's from ``warning`` up, to stderr, as bare messages
(the lines users read). A run adds ``<run_dir>/hfsdk.log`` (everything from the
chosen level, with time, level and logger). Worker processes prefix each line
with their role(s) and rank, so the console lines Ray forwards say who wrote
them, and append to ``<run_dir>/logs/<roles>_rank<N>.log``. The level and the
log directory reach workers through :data:`LEVEL_ENV` and :data:`DIR_ENV`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from hfsdk.core.errors import HfsdkError

LEVEL_ENV = "HFSDK_LOG_LEVEL"
DIR_ENV = "HFSDK_LOG_DIR"
LEVELS = ("debug", "info", "warning", "error")
RUN_LOG = "hfsdk.log"
WORKER_LOGS = "logs"
_FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_CONSOLE_MARK = "_hfsdk_console"
_FILE_MARK = "_hfsdk_run_log"


def _is_ours(name: str) -> bool:
    return name == "hfsdk" or name.startswith(("hfsdk.", "hfsdk_"))


class _LevelByOrigin(logging.Filter):
    """hfsdk's records from ``level``, other libraries' from WARNING (or ``level`` if higher)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        floor = self.level if _is_ours(record.name) else max(self.level, logging.WARNING)
        return record.levelno >= floor


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record (a test's capture, a
    redirected stream), never to a stream closed since the handler was made."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self):  # type: ignore[override]
        import sys

        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def parse_level(text: str | None, source: str = "--log-level") -> int:
    """``debug|info|warning|error`` (any case) as a logging level; ``None``: ``info``.
    ``source`` names where ``text`` came from in the error."""
    name = (text or "info").strip().lower()
    if name not in LEVELS:
        raise HfsdkError(f"{source} {text!r}: expected one of {', '.join(LEVELS)}")
    return getattr(logging, name.upper())


def _replace_handler(mark: str, handler: logging.Handler | None) -> None:
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, mark, False)]:
        root.removeHandler(old)
        old.close()
    if handler is not None:
        setattr(handler, mark, True)
        root.addHandler(handler)


def configure_logging(level: str | None = None, *, prefix: str = "") -> int:
    """Send log records to stderr (see the module docstring); returns the level.

    ``level`` defaults to :data:`LEVEL_ENV`, else ``info``; it is exported in
    :data:`LEVEL_ENV` for the worker processes this one starts. Calling it again
    replaces the handler (no line is printed twice).
    """
    numeric = parse_level(level) if level else parse_level(os.environ.get(LEVEL_ENV), LEVEL_ENV)
    os.environ[LEVEL_ENV] = logging.getLevelName(numeric).lower()
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(f"{prefix}%(message)s"))
    handler.addFilter(_LevelByOrigin(numeric))
    _replace_handler(_CONSOLE_MARK, handler)
    root = logging.getLogger()
    root.setLevel(min(numeric, logging.WARNING))
    for name in ("hfsdk", *_plugin_logger_names()):
        logging.getLogger(name).setLevel(numeric)
    logging.captureWarnings(True)  # warnings.warn goes through the same handler
    return numeric


def _plugin_logger_names() -> list[str]:
    """Top-level packages of the installed ``hfsdk_*`` plugins (their loggers' roots)."""
    from importlib.metadata import entry_points

    names = set()
    for entry in entry_points(group="hfsdk"):
        top = entry.value.split(":", 1)[0].split(".", 1)[0]
        if _is_ours(top):
            names.add(top)
    return sorted(names)


def attach_run_log(run_dir: Path) -> Path:
    """Also write every record of the chosen level to ``<run_dir>/hfsdk.log`` (appending, so a
    resumed run continues the file); worker processes started after this log beside it."""
    path = Path(run_dir) / RUN_LOG
    numeric = parse_level(os.environ.get(LEVEL_ENV))
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FILE_FORMAT))
    handler.addFilter(_LevelByOrigin(numeric))
    handler.handleError = lambda record: None  # type: ignore[method-assign]  # a full disk: no
    _replace_handler(_FILE_MARK, handler)  # traceback per line; the run's own error says it
    os.environ[DIR_ENV] = str(Path(run_dir).resolve())
    return path


def detach_run_log() -> None:
    """Close ``<run_dir>/hfsdk.log`` (the run is over)."""
    _replace_handler(_FILE_MARK, None)
    os.environ.pop(DIR_ENV, None)


def configure_worker_logging(roles: str, rank: int) -> None:
    """In a worker process: lines prefixed ``[<roles> rank <N>]`` and, when the controller
    logs to a run directory, a file ``logs/<roles>_rank<N>.log`` there."""
    label = f"[{roles} rank {rank}] "
    configure_logging(os.environ.get(LEVEL_ENV), prefix=label)
    directory = os.environ.get(DIR_ENV)
    if not directory:
        return
    try:
        logs = Path(directory) / WORKER_LOGS
        logs.mkdir(exist_ok=True)
        handler = logging.FileHandler(logs / f"{roles}_rank{rank}.log", encoding="utf-8")
    except OSError:  # the run directory is not reachable from this node: console only
        return
    file_format = f"%(asctime)s %(levelname)s {label}%(name)s: %(message)s"
    handler.setFormatter(logging.Formatter(file_format))
    handler.addFilter(_LevelByOrigin(parse_level(os.environ.get(LEVEL_ENV))))
    _replace_handler(_FILE_MARK, handler)
