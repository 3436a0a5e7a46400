"""A run directory's lifecycle: its path, lock and creation, and what it already holds.

The trainer opens one :class:`RunDirectory` per run: the path is checked first,
the lock is taken before any heavy work when the directory exists (a
concurrent run is refused at once), the directory is created only once the
run's inputs are checked, and a run that fails before doing anything leaves
nothing behind. A resumed run must keep the config of its checkpoints, except
the settings marked resumable (``help_field(..., resumable=True)``).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from hfsdk.core.checkpoint_files import load_checkpoint_file
from hfsdk.core.config.help import RESUMABLE_KEY
from hfsdk.core.config.paths import absolute_if_exists
from hfsdk.core.config.run_config import with_wandb_moved
from hfsdk.core.config.safe_yaml import load_yaml_text
from hfsdk.core.config.sources import SOURCES_FILE
from hfsdk.core.errors import HfsdkError
from hfsdk.core.logs import RUN_LOG
from hfsdk.core.trainer.checkpoint import CHECKPOINTS, complete_checkpoints, verify_checkpoint
from hfsdk.core.trainer.run_lock import LOCK_FILE, RunDirLock
from hfsdk.core.trainer.tracking import METRICS_FILE, read_metrics

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
TRAINER_STATE = "trainer_state.pt"

Checkpoint = tuple[int, Path, dict[str, Any]]
"""``(step, directory, trainer state)`` of a usable checkpoint."""


def resumable_keys(config: Any) -> set[str]:
    """Dotted key of every setting a resumed run of ``config`` may change, nested sections'
    too (a signal's scoring model: ``reward.model.micro_batch_size``)."""
    keys, todo = set(), list(config.sections.items())
    while todo:
        name, section = todo.pop()
        for field in attrs.fields(type(section)) if attrs.has(type(section)) else ():
            if field.metadata.get(RESUMABLE_KEY):
                keys.add(f"{name}.{field.name}")
            todo.append((f"{name}.{field.name}", getattr(section, field.name)))
    return keys


def _differences(old: Mapping, new: Mapping, prefix: tuple = (), value: Any = None) -> list:
    out = []
    for key in sorted(set(old) | set(new), key=str):
        a, b = old.get(key), new.get(key)
        # A field added to hfsdk later had its default; an entry added to a dict setting: a change.
        if key not in old and not isinstance(value, Mapping):
            continue
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            child = value.get(key) if isinstance(value, Mapping) else getattr(value, str(key), None)
            out.extend(_differences(a, b, (*prefix, key), child))
        elif a != b and absolute_if_exists(a) != b:  # recorded relative paths: read from here
            out.append((*prefix, key))
    return out


def config_changes(old: Mapping[str, Any], config: Any) -> list[str]:
    """The dotted keys that differ between a saved ``config.yaml`` (an older layout read as
    it loads) and ``config``, except the resumable ones."""
    allowed = resumable_keys(config)
    keys = _differences(with_wandb_moved(old), config.to_dict(), (), config)
    return [k for k in (".".join(map(str, key)) for key in keys) if k not in allowed]


class RunDirectory:
    """One run's directory: checked, locked, created on demand, removed if left empty."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = RunDirLock(path)
        self._created = False
        self._created_parents: list[Path] = []

    def check_path(self) -> None:
        """Refuse a path below a file, or a directory that is not a run but holds a file the
        run would overwrite (a user's own config.yaml was replaced), before anything runs."""
        for path in (self.path, *self.path.parents):
            if path.exists() and not path.is_dir():
                raise HfsdkError(
                    f"--run-dir {str(self.path)!r}: {str(path)!r} is a file, not a directory; "
                    "pass a directory path (it is created if missing)"
                )
        top = [p.parent for p in (self.path, self.path.parent) if p.name == CHECKPOINTS]
        if top and (top[0] / LOCK_FILE).exists():  # a run's checkpoints/ or a step_N in it
            raise HfsdkError(
                f"--run-dir {str(self.path)!r} is inside the checkpoints of run {str(top[0])!r}; "
                f"pass {str(top[0])!r} to resume from its newest checkpoint"
            )
        ours = [n for n in (CONFIG_FILE, METRICS_FILE, RUN_LOG) if (self.path / n).exists()]
        if ours and not any((self.path / n).exists() for n in (LOCK_FILE, CHECKPOINTS)):
            raise HfsdkError(
                f"--run-dir {str(self.path)!r} holds {ours[0]} but no hfsdk run (no {LOCK_FILE} "
                "or checkpoints/), which the run would overwrite; pass a new or empty --run-dir"
            )

    def lock_if_present(self) -> None:
        """Take the lock now when the directory exists (a concurrent run is refused at once)."""
        if self.path.is_dir():
            self._lock.acquire()

    def create_and_lock(self) -> None:
        """Create the directory (and its missing parents) unless held, then take the lock."""
        if self._lock.held:
            return
        self._created = not self.path.exists()
        # The directories mkdir will create (e.g. runs/ for the default runs/<algo>-<ts>).
        self._created_parents = [p for p in self.path.parents if not p.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HfsdkError(
                f"--run-dir {str(self.path)!r} cannot be created ({exc.strerror}); pass a "
                "writable directory"
            ) from None
        self._lock.acquire()

    def release(self) -> None:
        """Release the lock (the directory stays)."""
        self._lock.release()

    def abandon(self) -> None:
        """Release the lock; remove the directory if this run created it and did nothing."""
        self._lock.release()
        if not self._created or not self.path.is_dir():
            return
        # An entry no start writes is a logger's record of steps (tensorboard/, wandb/: without
        # jsonl in trainer.loggers, metrics.jsonl stays empty however many steps were logged).
        started = {CONFIG_FILE, SOURCES_FILE, RUN_LOG, METRICS_FILE, LOCK_FILE, CHECKPOINTS}
        logged = {p.name for p in self.path.iterdir()} - started
        if logged or complete_checkpoints(self.path) or read_metrics(self.path):
            return  # finished steps are worth keeping
        shutil.rmtree(self.path, ignore_errors=True)
        for parent in self._created_parents:  # innermost first; only if still empty
            try:
                parent.rmdir()
            except OSError:
                break

    def check_config_matches(self, config: Any, *, given: Any | None = None) -> None:
        """A directory with checkpoints resumes only the same config (resumable keys aside).

        ``given``: the config as the user gave it, when ``config`` has the default task's
        signals filled in; a ``config.yaml`` saved before they were filled shows them as
        given, so a key has changed only if it differs from both."""
        path = self.path / CONFIG_FILE
        if not complete_checkpoints(self.path) or not path.exists():
            return
        old = load_yaml_text(path.read_text(), source=str(path)) or {}
        changed = config_changes(old, config)
        if given is not None:
            as_given = set(config_changes(old, given))
            changed = [key for key in changed if key in as_given]
        if changed:
            raise HfsdkError(
                f"run directory {str(self.path)!r} holds a checkpoint of a run with a different "
                f"config ({', '.join(changed[:6])} changed); resume with the same config or pass "
                "a new --run-dir"
            )

    def usable_checkpoints(self) -> Iterator[Checkpoint]:
        """Checkpoints whose files are intact, newest first, with their trainer state, each
        checked when drawn (checking all of them read every checkpoint at every start).

        A damaged one (a ``step_N`` without its marker too) gets a one-line warning naming
        the file once an older one is usable; if none is, the run stops (starting over
        would silently discard the run).
        """
        found, problems = complete_checkpoints(self.path, unmarked=True), []
        for step, path in found:
            problem, state_file = verify_checkpoint(path), path / TRAINER_STATE
            if problem is None:
                try:
                    state = load_checkpoint_file(state_file)
                    if not isinstance(state, dict) or "step" not in state:
                        raise ValueError("not a trainer state")
                except FileNotFoundError:
                    problem = f"{state_file} is missing"
                except Exception as exc:  # its message's first line, else its type
                    why = "".join(str(exc).strip().splitlines()[:1]) or type(exc).__name__
                    problem = f"{state_file} cannot be read ({why})"
            if problem is not None:
                problems.append((step, problem))
                continue
            for skipped, why in problems:
                logger.warning(
                    "checkpoint step_%d is unusable: %s; trying an older one", skipped, why
                )
            problems = []
            yield (step, path, state)
        if problems and len(problems) == len(found):
            raise HfsdkError(
                f"no usable checkpoint in {str(self.path)!r}: {problems[0][1]}; restore the file, "
                f"or remove {str(self.path / 'checkpoints')!r} to start over, or pass a new "
                "--run-dir"
            )
