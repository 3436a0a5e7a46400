"""``hfsdk export``: any checkpoint of a run, every role with weights, in Hugging Face format.

The checkpoint is read by the training backend that wrote it: the run's saved
``config.yaml`` starts the same worker groups (same backends, layouts and LoRA
settings), they load ``checkpoints/step_N`` exactly as a resume would, and each
role writes itself with its backend's own HF export (the same code a run's
``actor_hf/`` comes from). So sharded checkpoints, tensor/pipeline-parallel
shards and LoRA adapters need no second reader that could drift from the
writer. The result lands in a temporary sibling of ``--out`` and is renamed
into place only once every role is written.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from hfsdk import CONFIG_FILE, HfsdkError, complete_checkpoints, verify_checkpoint

logger = logging.getLogger(__name__)


def checkpoint_of(run_dir: Path, step: int | None) -> tuple[int, Path]:
    """The complete, intact checkpoint ``step`` of ``run_dir`` (default: the newest)."""
    found = complete_checkpoints(run_dir)
    if not found:
        raise HfsdkError(
            f"{str(run_dir)!r} has no complete checkpoint under checkpoints/; pass the --run-dir "
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
    from hfsdk import TrainingSession, prepare_run, run_spec

    run_dir, out = Path(run_dir), Path(out).absolute()  # absolute: "." has a name too
    if not run_dir.is_dir():
        raise HfsdkError(f"RUN_DIR {str(run_dir)!r} is not a directory; pass a run directory")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HfsdkError(
            f"--out {str(out)!r} exists and is not empty; pass a new directory (nothing is "
            "overwritten)"
        )
    chosen_step, path = checkpoint_of(run_dir, step)
    config = run_config_of(run_dir, lora_merged=lora_merged)
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
    wanted = list(roles) or default
    logger.info(
        "export: step_%d of %s (%s) with the run's own backends", chosen_step, run_dir,
        ", ".join(wanted),
    )  # fmt: skip
    # This process's own: two exports to one --out must not share (or delete) a folder. An
    # existing (empty) --out, the working directory say, is filled from a folder inside it.
    name = f"tmp-export-{os.getpid()}"
    tmp = out / f".{name}" if out.is_dir() else out.with_name(f".{out.name}.{name}")
    try:
        tmp.mkdir(parents=True)
    except OSError as exc:
        raise HfsdkError(
            f"--out {str(out)!r} cannot be written ({exc.strerror or exc}); give a folder you "
            "can create"
        ) from None
    written: dict[str, Path] = {}
    try:
        with TrainingSession(config, spec, prepared=prepare_run(config, spec)) as session:
            try:
                session.load_workers(path)
            except HfsdkError:
                if not path.is_dir():
                    raise HfsdkError(_PRUNED.format(path=path)) from None
                raise
            for role in wanted:
                target = tmp if len(wanted) == 1 and roles else tmp / role
                session.groups[role].export_hf(str(target))
                written[role] = out if target == tmp else out / role
        _move_into(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written


_PRUNED = (
    "checkpoint {path} was removed while it was read (the run's trainer.keep_last pruned "
    "it?); export again with --step of a checkpoint the run keeps"
)


def _move_into(tmp: Path, out: Path) -> None:
    """``tmp``'s export at ``out``: renamed there, or, when ``tmp`` is inside ``out`` (an
    existing empty folder), its entries moved up; never over anything."""
    if tmp.parent == out:
        if any(entry != tmp for entry in out.iterdir()):
            raise HfsdkError(f"--out {str(out)!r} was written meanwhile; pass a new directory")
        for entry in tmp.iterdir():
            entry.rename(out / entry.name)
        tmp.rmdir()
        return
    try:
        tmp.rename(out)  # fails on a folder with files: another export got there first
    except OSError as exc:
        raise HfsdkError(
            f"--out {str(out)!r} was written meanwhile ({exc.strerror}); nothing of it is "
            "overwritten, pass a new directory"
        ) from None
