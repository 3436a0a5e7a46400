"""``hfsdk export``: any checkpoint of a run, every role with weights, in Hugging Face format.

The checkpoint is read by the training backend that wrote it: the run's saved
``config.yaml`` starts the same worker groups (same backends, layouts and LoRA
settings), they load ``checkpoints/step_N`` exactly as a resume would, and each
role writes itself with its backend's own HF export (the same code a run's
``actor_hf/`` comes from). So sharded checkpoints, tensor/pipeline-parallel
shards and LoRA adapters need no second reader that could drift from the
writer. The result lands in a temporary sibling of ``--out`` and is renamed
into place only once every role is written; SIGTERM and Ctrl-C remove it, and the
next export removes one a SIGKILL left.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from hfsdk import CONFIG_FILE, ROLLOUT_POOL, HfsdkError, complete_checkpoints, verify_checkpoint

logger = logging.getLogger(__name__)


def without_rollout_pool(config: Any) -> Any:
    """``config`` without ``placement.pools.rollout`` (and what only it allows: roles placed
    on it, ``trainer.partial_rollout_tokens``), for a session that only loads and updates or
    exports the run's roles: export and replay sample nothing, so the rollout replicas
    would hold every device of that pool for nothing. The roles' own pools are unchanged."""
    placement = config.placement
    if ROLLOUT_POOL not in placement.pools:
        return config
    pools = {name: pool for name, pool in placement.pools.items() if name != ROLLOUT_POOL}
    roles = {role: pool for role, pool in placement.roles.items() if pool != ROLLOUT_POOL}
    placement = attrs.evolve(placement, pools=pools, roles=roles)
    # Partial rollouts are refused without a rollout pool (the pipelines' preflight check).
    trainer = attrs.evolve(config.trainer, partial_rollout_tokens=0)
    sections = {**config.sections, "placement": placement, "trainer": trainer}
    return attrs.evolve(config, sections=sections)


def checkpoint_of(run_dir: Path, step: int | None) -> tuple[int, Path]:
    """The complete, intact checkpoint ``step`` of ``run_dir`` (default: the newest)."""
    found = complete_checkpoints(run_dir)
    if not found:
        raise HfsdkError(
            f"{str(run_dir)!r} has no complete checkpoint under checkpoints/; pass the RUN_DIR "
            "of a run that saved at least one step (trainer.save_every, or its last step)"
        )
    if step is None:
        chosen = found[0]
    else:
        chosen = next((item for item in found if item[0] == step), None)
        if chosen is None:
            steps = ", ".join(str(s) for s, _ in sorted(found))
            raise HfsdkError(
                f"--step {step}: {str(run_dir)!r} has no checkpoint of that step; it has steps "
                f"{steps}"
            )
    problem = verify_checkpoint(chosen[1])
    if problem is not None:
        raise HfsdkError(
            f"checkpoint step_{chosen[0]} is damaged: {problem}; export another --step"
        )
    return chosen


def run_config_of(run_dir: Path, *, lora_merged: bool) -> Any:
    """The run's saved config, with every LoRA role also exporting its merged model if asked."""
    from hfsdk import load_run_config

    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise HfsdkError(
            f"{str(run_dir)!r} has no {CONFIG_FILE}; pass the run directory an `hfsdk run` wrote"
        )
    config = load_run_config(None, str(path))
    sections = dict(config.sections)
    for name, section in config.sections.items():
        lora = getattr(section, "lora", None)
        # Either way: --no-lora-merged gives the adapter alone even where the run merged.
        if lora is not None and getattr(lora, "enabled", False):
            merged = attrs.evolve(lora, export_merged=lora_merged)
            sections[name] = attrs.evolve(section, lora=merged)
    return attrs.evolve(config, sections=sections)


def export_checkpoint(
    run_dir: str | Path,
    out: str | Path,
    *,
    step: int | None = None,
    roles: Sequence[str] = (),
    lora_merged: bool = True,
) -> dict[str, Path]:
    """Export checkpoint ``step`` (default: the newest) of ``run_dir`` to ``out``.

    Each trained role goes to ``out/<role>`` (the policy loads with
    ``AutoModelForCausalLM``, a critic or a trained reward model with its
    role's auto class, each with its tokenizer); with a single role asked for,
    ``out`` itself is that role's directory. A LoRA policy writes its adapter
    (peft format) and, unless ``lora_merged`` is off, the merged model in
    ``merged/``. Returns role -> directory.
    """
    from hfsdk import TrainingSession, run_spec

    run_dir, out = Path(run_dir), Path(out).resolve()  # resolved: "." and ".." have a name too
    if not run_dir.is_dir():
        raise HfsdkError(f"RUN_DIR {str(run_dir)!r} is not a directory; pass a run directory")
    remove_stale_staging(out)  # a killed export's: not content, and no longer anyone's
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HfsdkError(
            f"--out {str(out)!r} "
            + ("exists and is not empty" if out.is_dir() else "is a file, not a directory")
            + "; pass a new directory (nothing is overwritten)"
        )
    chosen_step, path = checkpoint_of(run_dir, step)
    config = without_rollout_pool(run_config_of(run_dir, lora_merged=lora_merged))
    spec = run_spec(config)
    trained = [r for r in spec.role_names if spec.kind_of(r) != "scorer"]
    # The reference is the starting model, unchanged: exported only when asked for by name.
    default = [r for r in trained if spec.kind_of(r) != "frozen_policy" and (path / r).exists()]
    if not path.is_dir():
        raise HfsdkError(_PRUNED.format(path=path))
    unknown = [r for r in roles if r not in trained]
    if unknown:
        raise HfsdkError(
            f"--role {unknown[0]}: the {config.algo} run has no trained role of that name; "
            f"its roles with weights are {', '.join(trained)}"
        )
    # A role named twice is one role: exported once, and alone it is --out itself.
    wanted = list(dict.fromkeys(roles)) or default
    into_cwd = out.is_dir() and out.samefile(Path.cwd())
    if into_cwd and (len(wanted) != 1 or roles):
        # The shell sits in this folder: it cannot be swapped for the finished export, and
        # entries moved in one by one could be cut short by a kill, half an export.
        raise HfsdkError(
            f"--out {str(out)!r} is the working directory, into which an export moves only "
            "one folder (one role, without --role); pass a new directory, e.g. --out export"
        )
    logger.info(
        "export: step_%d of %s (%s) with the run's own backends", chosen_step, run_dir,
        ", ".join(wanted),
    )  # fmt: skip
    # This process's own, beside --out (never in it: a kill would leave it there): two exports
    # to one --out must not share (or delete) a folder.
    tmp = out.with_name(f".{out.name}{_STAGING}{os.getpid()}")
    written: dict[str, Path] = {}
    stop = _SigtermUnwinds()
    stop.install()  # before the folder exists: a SIGTERM from then on removes it
    try:
        try:
            tmp.mkdir(parents=True)
        except OSError as exc:
            raise HfsdkError(
                f"--out {str(out)!r} cannot be written ({exc.strerror or exc}); give a folder "
                "you can create"
            ) from None
        with TrainingSession(config, spec, prepared=weights_only(config, spec)) as session:
            stop.install()  # again: starting Ray installs its own SIGTERM handler
            try:
                session.load_workers(path)
            except HfsdkError:
                if not path.is_dir():
                    raise HfsdkError(_PRUNED.format(path=path)) from None
                raise
            for role in wanted:
                target = tmp if len(wanted) == 1 and roles else tmp / role
                session.groups[role].export_hf(str(target))
                check_written(role, target)
                written[role] = out if target == tmp else out / role
        stop.check()
        _publish(tmp, out, one_entry=into_cwd)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if stop.received:  # whatever the signal's exception became on its way up
            logger.warning("export stopped by SIGTERM: nothing was written to --out %s", out)
            raise SystemExit(128 + signal.SIGTERM) from None
        raise
    finally:
        stop.restore()
    return written


@attrs.frozen(kw_only=True)
class WeightsOnly:
    """A ``prepare_run`` result's fields (all of them, so a session reading another one
    still works), for a session that only loads a checkpoint and writes it out: no prompts,
    no signals, no tools."""

    assets: Any
    tokenizer: Any
    loader: None = None
    val_loader: None = None
    signal_configs: dict[str, Any] = attrs.field(factory=dict)
    tools: list[Any] = attrs.field(factory=list)
    reward_scorers: dict[str, Any] = attrs.field(factory=dict)
    row_columns: tuple[str, ...] = ()


def weights_only(config: Any, spec: Any) -> WeightsOnly:
    """The run's model and tokenizer paths and its tokenizer, without ``prepare_run``.

    ``prepare_run`` loads and tokenizes the whole training set and builds the reward
    functions and preflight checks: none of it is needed to write weights, and a dataset
    moved or deleted since the run (a copied run directory) would block the export.
    """
    from hfsdk import load_tokenizer, run_assets

    assets = run_assets(config, spec)
    return WeightsOnly(assets=assets, tokenizer=load_tokenizer(assets.tokenizer_path))


MODEL_FILES = ("config.json", "adapter_config.json")
"""What an exported role's directory holds: an HF model, or a LoRA actor's adapter."""


def check_written(role: str, directory: Path) -> None:
    """Refuse a role whose export left ``directory`` without a model: its backend reported
    success, but an empty folder at ``--out`` is no export."""
    if not any((directory / name).is_file() for name in MODEL_FILES):
        raise HfsdkError(
            f"the {role} export wrote no model (no config.json or adapter_config.json in "
            f"{str(directory)!r}); nothing was written to --out; export the other roles with "
            "--role and report this as a bug"
        )


_PRUNED = (
    "checkpoint {path} was removed while it was read (the run's trainer.keep_last pruned "
    "it?); export again with --step of a checkpoint the run keeps"
)
_STAGING = ".tmp-export-"
"""``.<out's name>.tmp-export-<pid>``: the folder beside ``--out`` an export is written in."""


class _Terminated(SystemExit):
    """SIGTERM during an export: unwinds it like Ctrl-C, so its staging folder is removed."""


class _SigtermUnwinds:
    """While installed, the first SIGTERM raises :class:`_Terminated` where the export is
    (by default SIGTERM ends the process at once, skipping every cleanup); later ones are
    ignored so that the cleanup finishes."""

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        """Install (again, after a library replaced it) the handler; main thread only."""
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.signal(signal.SIGTERM, self._handle)
        if not self._installed:
            self._previous, self._installed = previous, True

    def restore(self) -> None:
        """Put the handler from before :meth:`install` back."""
        if self._installed:
            default = signal.SIG_DFL if self._previous is None else self._previous
            signal.signal(signal.SIGTERM, default)
            self._installed = False

    def check(self) -> None:
        """Raise :class:`_Terminated` if SIGTERM came while something swallowed its exception."""
        if self.received:
            raise _Terminated(128 + signal.SIGTERM)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received:
            return
        self.received = True
        raise _Terminated(128 + signum)


def remove_stale_staging(out: Path) -> None:
    """Remove the staging folders of exports to ``out`` whose process is gone (killed).

    Each is named after its process id (``.<name>.tmp-export-<pid>`` beside ``out``; before,
    ``.tmp-export-<pid>`` inside it); one of a live process is another export's, kept.
    """
    found = list(out.parent.glob(f".{glob.escape(out.name)}{_STAGING}*"))
    if out.is_dir():
        found += out.glob(f"{_STAGING}*")
    for folder in found:
        pid = folder.name.rpartition(_STAGING)[2]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _publish(tmp: Path, out: Path, *, one_entry: bool) -> None:
    """``tmp``'s export at ``out`` in one rename, never over anything: ``tmp`` itself renamed
    to ``out`` (rename(2) replaces an empty folder atomically), or, with ``one_entry`` (``out``
    is the working directory, which stays), ``tmp``'s single entry renamed into ``out``."""
    source, target = tmp, out
    if one_entry:
        (source,) = tmp.iterdir()
        target = out / source.name
        if any(out.iterdir()):  # rename(2) would replace an empty folder of that name
            raise HfsdkError(f"--out {str(out)!r} was written meanwhile; pass a new directory")
    try:
        source.rename(target)  # fails on a folder with files: another export got there first
    except OSError as exc:
        raise HfsdkError(
            f"--out {str(out)!r} was written meanwhile ({exc.strerror}); nothing of it is "
            "overwritten, pass a new directory"
        ) from None
    if one_entry:
        tmp.rmdir()
