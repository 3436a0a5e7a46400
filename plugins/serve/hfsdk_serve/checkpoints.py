"""Saved states: ``tinker://<model_id>/<kind>/<name>`` paths over a state directory.

``kind`` is ``weights`` (``save_state``: adapter and optimizer) or
``sampler_weights`` (``save_weights_for_sampler``: adapter only). A checkpoint is
one ``torch.save`` file, written to a temporary name and renamed, so a server
killed mid-save leaves the previous checkpoint intact and a restarted server
(same ``--state-dir``) loads any path it handed out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from hfsdk import HfsdkError, atomic_path

SCHEME = "tinker://"
KINDS = ("weights", "sampler_weights")
FILE = "checkpoint.pt"
FORMAT = "hfsdk-serve/1"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
_MODEL_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:-]{0,255}$")


def _check_name(value: str, what: str) -> str:
    if not _NAME.match(value):
        raise HfsdkError(
            f"{what} {value!r} is not a valid checkpoint name; use letters, digits, '.', '_' "
            "and '-' (at most 128, not starting with '.' or '-')"
        )
    return value


def tinker_path(model_id: str, kind: str, name: str) -> str:
    """The path the SDK gets back for a checkpoint."""
    return f"{SCHEME}{model_id}/{kind}/{_check_name(name, 'name')}"


def resolve(state_dir: Path, path: str) -> Path:
    """The checkpoint file of a ``tinker://`` path (an :class:`HfsdkError` when malformed)."""
    if not path.startswith(SCHEME):
        raise HfsdkError(
            f"checkpoint path {path!r} does not start with {SCHEME}; pass the path save_state or "
            "save_weights_for_sampler returned"
        )
    parts = path[len(SCHEME) :].split("/")
    if len(parts) != 3 or parts[1] not in KINDS:
        raise HfsdkError(
            f"checkpoint path {path!r} is not of the form {SCHEME}<model_id>/<weights|"
            "sampler_weights>/<name>"
        )
    model_id, kind, name = parts
    if not _MODEL_ID.match(model_id):
        raise HfsdkError(f"checkpoint path {path!r} names no valid model id ({model_id!r})")
    return state_dir / model_id / kind / _check_name(name, "name") / FILE


def write(file: Path, state: dict[str, Any], *, overwrite: bool) -> None:
    """Write ``state`` atomically (refusing to replace an existing one unless ``overwrite``)."""
    if file.exists() and not overwrite:
        raise HfsdkError(
            f"a checkpoint named {file.parent.name!r} exists for this model; pick another name or "
            "pass overwrite=True"
        )
    file.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(file) as tmp:
        torch.save({"format": FORMAT, **state}, tmp)


def read(file: Path, path: str) -> dict[str, Any]:
    """The state saved at ``path`` (resolved to ``file``)."""
    if not file.is_file():
        raise HfsdkError(f"no checkpoint at {path} on this server (looked in {file.parent})")
    try:
        state = torch.load(file, map_location="cpu", weights_only=False)
    except Exception as exc:  # a truncated or foreign file: torch says why in its own terms
        raise HfsdkError(
            f"the checkpoint at {path} cannot be read ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}); it may be truncated or "
            "corrupted: save it again, or load another"
        ) from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise HfsdkError(f"{file} is not an hfsdk serve checkpoint ({FORMAT})")
    return state
