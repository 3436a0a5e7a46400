"""``run_info.jsonl``: what each start of a run ran with, so a changed result can be explained.

Every start of a run (fresh, resumed, or restarted after a worker failure) appends one
JSON line to ``run_info.jsonl`` in the run directory (:data:`RUN_INFO_FILE`): the time,
the step it starts from, the Python, platform and torch CPU capability, the versions of
hfsdk and the heavy packages (:data:`PACKAGES`, read from their installed metadata, never
imported), every loaded plugin, the git state of the working directory's repository, and
the sha256 of the run's data files and of each role's model files (:func:`collect`).

``hfsdk replay`` compares the last line with the environment it runs in and prints one
warning line per difference (:func:`warn_of_changes`), so a step that no longer
reproduces comes with its likely reason; a resume warns of a data file whose checksum
changed (:class:`RunInfoObserver`).
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from hfsdk import StepObserver, StepView

logger = logging.getLogger(__name__)

RUN_INFO_FILE = "run_info.jsonl"
"""The file in the run directory, one JSON object per start of the run."""

PACKAGES = ("hfsdk", "torch", "transformers", "ray", "vllm", "megatron-core")
"""Distributions whose versions are recorded (``None``: not installed)."""

MODEL_FILES = (
    "*.safetensors",
    "*.bin",
    "config.json",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
)
"""The files of a model directory whose checksums are recorded (weights, config, tokenizer)."""

HASH_LIMIT_BYTES = 2 * 1024**3
"""Above this many bytes per path (a data file, or a model directory's files together) only
size and mtime are recorded (``"sha256": null``): hashing them would delay every start."""

GIT_TIMEOUT_S = 10.0
_CHUNK = 1 << 20


def package_versions() -> dict[str, str | None]:
    """Each of :data:`PACKAGES` -> its installed version, ``None`` when not installed."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def loaded_plugins() -> dict[str, dict[str, str | None]]:
    """Each loaded plugin's name -> its distribution and version."""
    from hfsdk import get_plugin_manager

    return {
        p.name: {"distribution": p.distribution, "version": p.version}
        for p in get_plugin_manager().plugins
        if p.status == "loaded"
    }


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # no git, or it hung: nothing to record
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(cwd: Path | None = None) -> dict[str, Any]:
    """The commit and dirty flag (modified tracked files) of the git repository ``cwd``
    (default: the working directory) is in; both ``None`` outside a repository or without git."""
    cwd = Path.cwd() if cwd is None else cwd
    commit = _git(cwd, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    # --no-optional-locks: status must not refresh the index of a repository it only reads
    status = _git(cwd, "--no-optional-locks", "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def sha256_of(path: Path) -> str:
    """The file's sha256, read in chunks (a file of any size in little memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _records(files: list[Path]) -> dict[str, dict[str, Any]] | None:
    """Each file -> size, mtime and sha256; sha256 ``None`` for all when together they are
    above :data:`HASH_LIMIT_BYTES`. ``None`` when a file cannot be read."""
    try:
        stats = {f: f.stat() for f in files}
        hashed = sum(s.st_size for s in stats.values()) <= HASH_LIMIT_BYTES
        return {
            str(f): {
                "size": s.st_size,
                "mtime": s.st_mtime,
                "sha256": sha256_of(f) if hashed else None,
            }
            for f, s in stats.items()
        }
    except OSError:
        return None


def data_checksums(files: list[str]) -> dict[str, dict[str, Any] | None]:
    """Each data file -> its size, mtime and sha256 (``None``: not a readable file here)."""
    out: dict[str, dict[str, Any] | None] = {}
    for name in files:
        path = Path(name)
        records = _records([path]) if path.is_file() else None
        out[name] = None if records is None else records[str(path)]
    return out


def model_checksums(path: str | None) -> dict[str, Any]:
    """The model directory ``path`` and its weight, config and tokenizer files (relative
    name -> size, mtime, sha256); ``files`` is ``None`` when ``path`` is not a directory here."""
    if path is None or not Path(path).is_dir():
        return {"path": path, "files": None}
    root = Path(path)
    files = sorted(
        f
        for f in root.iterdir()
        if f.is_file() and any(fnmatch.fnmatch(f.name, p) for p in MODEL_FILES)
    )
    records = _records(files)
    if records is None:
        return {"path": path, "files": None}
    return {"path": path, "files": {Path(k).name: v for k, v in records.items()}}


def _run_files(config: Any) -> tuple[list[str], dict[str, str | None]]:
    """The data files the run reads and each role's model path, as the run resolves them
    (the default task's built files when the config names none)."""
    from hfsdk import run_assets, run_spec

    spec = run_spec(config)
    try:
        assets = run_assets(config, spec)
    except Exception:  # a record must not stop a run: fall back to the config
        logger.debug("run_info: the run's assets could not be resolved", exc_info=True)
        assets = None
    data = list(config.data.train_files) + list(config.data.val_files)
    if assets is not None:
        data = list(assets.train_files) + list(assets.val_files)
    models: dict[str, str | None] = {}
    for role in spec.roles:
        section = config.sections.get(role.name)
        path = getattr(section, "model_path", None)
        if path is None and assets is not None and role.name == spec.main_role:
            path = assets.model_path  # the built-in task's model the run starts from
        if section is not None and hasattr(section, "model_path"):
            models[role.name] = None if path is None else str(path)
    return data, models


def environment() -> dict[str, Any]:
    """The interpreter, platform, torch CPU capability, package versions, plugins and git
    state of this process (no data or model checksums)."""
    try:
        import torch  # already imported by any run or replay: this costs nothing there

        capability: str | None = torch.backends.cpu.get_cpu_capability()
    except Exception:  # an old torch without it: nothing to record
        capability = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch_cpu_capability": capability,
        "packages": package_versions(),
        "plugins": loaded_plugins(),
        "git": git_state(),
    }


def collect(config: Any) -> dict[str, Any]:
    """Everything a ``run_info.jsonl`` line records for a run of ``config``, but the time and
    start step: :func:`environment`, and the data and model checksums."""
    data, models = _run_files(config)
    return {
        **environment(),
        "data": data_checksums(data),
        "models": {role: model_checksums(path) for role, path in models.items()},
    }


def read_last(run_dir: Path) -> dict[str, Any] | None:
    """The last complete line of the run's ``run_info.jsonl``; ``None`` when there is none
    (a run from before this file, or one that never started a step)."""
    path = Path(run_dir) / RUN_INFO_FILE
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            value = json.loads(line)
        except ValueError:  # a line cut by a crash of another writer: take the one before
            continue
        if isinstance(value, dict):
            return value
    return None


def append(run_dir: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line: written whole with one ``write`` and synced, so a
    crash leaves the file without it rather than with half of it."""
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(Path(run_dir) / RUN_INFO_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_changed(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Whether two records of a file differ: by sha256, or, when neither was hashed (too
    large), by size or mtime. A file missing from either is no change (nothing to compare)."""
    if not old or not new:
        return False
    if old.get("sha256") and new.get("sha256"):
        return old["sha256"] != new["sha256"]
    return (old.get("size"), old.get("mtime")) != (new.get("size"), new.get("mtime"))


def changed_data(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The data files both records hold whose contents differ (:func:`_file_changed`)."""
    old, new = before.get("data") or {}, now.get("data") or {}
    return [name for name in sorted(set(old) & set(new)) if _file_changed(old[name], new[name])]


def _checksum(record: dict[str, Any]) -> str:
    sha = record.get("sha256")
    return (
        f"sha256 {sha[:12]}…" if sha else f"size {record.get('size')}, mtime {record.get('mtime')}"
    )


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """One phrase per difference between a recorded line and ``now`` ("torch 2.13.0 here,
    2.12.0 in the run"): versions, plugins, Python, CPU capability, data and model files.

    A file the run had that is missing here is not one: replay needs no data files, and a
    missing model stops it anyway.
    """
    found = []
    for key, what in (("python", "python"), ("torch_cpu_capability", "torch CPU capability")):
        if key in before and before[key] != now.get(key):
            found.append(f"{what} {now.get(key)} here, {before[key]} in the run")
    old_packages, new_packages = before.get("packages") or {}, now.get("packages") or {}
    for name in sorted(set(old_packages) | set(new_packages)):
        a, b = old_packages.get(name), new_packages.get(name)
        if a != b:
            found.append(f"{name} {b or 'not installed'} here, {a or 'not installed'} in the run")
    old_plugins, new_plugins = before.get("plugins") or {}, now.get("plugins") or {}
    for name in sorted(set(old_plugins) | set(new_plugins)):
        a, b = old_plugins.get(name), new_plugins.get(name)
        if a != b:
            here = f"{b['distribution']} {b['version']}" if b else "not loaded"
            there = f"{a['distribution']} {a['version']}" if a else "not loaded"
            found.append(f"plugin {name}: {here} here, {there} in the run")
    for name in changed_data(before, now):
        old, new = before["data"][name], now["data"][name]
        found.append(f"data file {name} has {_checksum(new)} here, {_checksum(old)} in the run")
    old_models, new_models = before.get("models") or {}, now.get("models") or {}
    for role in sorted(set(old_models) & set(new_models)):
        old_files = old_models[role].get("files") or {}
        new_files = new_models[role].get("files") or {}
        if not old_files or not new_files:
            continue
        changed = sorted(
            f
            for f in set(old_files) | set(new_files)
            if f not in old_files or f not in new_files or _file_changed(old_files[f], new_files[f])
        )
        if changed:
            found.append(
                f"{role} model {new_models[role].get('path')}: {', '.join(changed)} differ from "
                "the run's"
            )
    return found


def warn_of_changes(run_dir: Path, config: Any) -> list[str]:
    """``hfsdk replay``: print to stderr one warning line per difference between the run's
    last ``run_info.jsonl`` line and this environment; return the lines (none for a run
    without the file)."""
    before = read_last(Path(run_dir))
    if before is None:
        return []
    try:
        now = collect(config)
    except Exception:  # a warning must not stop a replay
        logger.debug("run_info: this environment could not be recorded", exc_info=True)
        return []
    lines = [f"replay: {d}; numbers may differ" for d in differences(before, now)]
    for line in lines:
        print(line, file=sys.stderr)
    return lines


class RunInfoObserver(StepObserver):
    """Appends the run's ``run_info.jsonl`` line at the first step of each start, when the
    step it starts from is known; on a resume, first warns of data files that changed.

    The checksums are taken when the observer is built, before the step loop, so their
    time does not count in the first step's timings.
    """

    def __init__(self, config: Any, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.record: dict[str, Any] | None = None
        try:
            self.record = collect(config)
        except Exception as exc:  # a missing record must not stop the training
            logger.warning("%s will get no line for this start: %s", RUN_INFO_FILE, exc)
        self.written = False

    def on_step_start(self, view: StepView) -> None:
        """The first step of this start: record it."""
        if self.written:
            return
        self.written = True  # once per start
        now = self.record
        if now is None:
            return
        start = view.step - 1
        before = read_last(self.run_dir)
        if start > 0 and before is not None:
            for name in changed_data(before, now):
                logger.warning(
                    "data file %s changed since the run's last start (%s then, %s now); the "
                    "resumed run trains on the new contents from step %d",
                    name,
                    _checksum(before["data"][name]),
                    _checksum(now["data"][name]),
                    view.step,
                )
        time = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        try:
            append(self.run_dir, {"time": time, "start_step": start, **now})
        except OSError as exc:  # a missing record must not stop the training
            logger.warning("could not append to %s: %s", self.run_dir / RUN_INFO_FILE, exc)


def run_info_observer(config: Any, run_dir: Path) -> RunInfoObserver:
    """The ``run_info`` step observer's factory (every run)."""
    return RunInfoObserver(config, run_dir)
