"""A model role's ``model_path`` and ``tokenizer_path`` name local directories it can load.

hfsdk never downloads from the hub, so each path set on a backend role section (and on a
signal's scoring model) must be a directory saved with ``save_pretrained``; the
``model_dirs`` preflight check refuses one that is not, naming its key, before Ray starts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hfsdk import HfsdkError, SignalConfig
from hfsdk_backend_common.role_fields import TrainedRoleConfig

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json",
                   "vocab.txt", "spiece.model")  # fmt: skip
"""Files of a directory ``PreTrainedTokenizerFast`` / ``AutoTokenizer`` load a tokenizer from."""

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")  # fmt: skip
"""The weight files ``from_pretrained`` loads a model from (one file, or a sharded one's index)."""


def check_model_path(key: str, path: str | None) -> None:
    """``path`` (config key ``key``) must be a local HF model directory when set: a
    config.json that parses and a weights file (:data:`WEIGHT_FILES`)."""
    if path is None:
        return
    directory = Path(path).expanduser()
    if not directory.exists():
        raise HfsdkError(
            f"{key}={path!r} does not exist; point it at a local HF model directory (made with "
            "save_pretrained; hfsdk never downloads from the hub) or unset it for the default task"
        )
    if (
        directory.is_dir()
        and (directory / "adapter_config.json").is_file()
        and not (directory / "config.json").is_file()
    ):
        # A LoRA run's actor_hf/ (or export) is the adapter alone: its model is in merged/ only
        # when the run had actor.lora.export_merged=true (hfsdk export writes <out>/actor/merged).
        merged = directory / "merged"
        if merged.is_dir():
            where = f"point it at {str(merged)!r}, the merged model written beside it"
        else:
            where = (
                "point it at a merged model: `hfsdk export RUN_DIR --out DIR --lora-merged` "
                "writes one to DIR/actor/merged, or rerun with actor.lora.export_merged=true "
                "to get <actor_hf>/merged"
            )
        raise HfsdkError(
            f"{key}={path!r} holds a LoRA adapter, not a model (adapter_config.json, no "
            f"config.json); {where}"
        )
    if not directory.is_dir() or not (directory / "config.json").is_file():
        raise HfsdkError(
            f"{key}={path!r} is not an HF model directory (no config.json there); point it at a "
            "directory made with save_pretrained"
        )
    _check_config_json(key, path, directory / "config.json")
    if not any((directory / name).is_file() for name in WEIGHT_FILES):
        # Without this the workers start and the first from_pretrained fails there (exit 3).
        raise HfsdkError(
            f"{key}={path!r} has config.json but no weights (none of {', '.join(WEIGHT_FILES)}); "
            "point it at a complete directory made with save_pretrained"
        )


def _check_config_json(key: str, path: str, config_file: Path) -> None:
    """A truncated or hand-edited config.json fails only inside a worker; read it here."""
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HfsdkError(
            f"{key}={path!r} has a config.json that is not valid JSON ({exc}); re-save the "
            "model with save_pretrained"
        ) from exc
    if not isinstance(config, dict):
        raise HfsdkError(
            f"{key}={path!r} has a config.json holding a {type(config).__name__}, expected a "
            "JSON object; re-save the model with save_pretrained"
        )


def check_tokenizer_path(key: str, path: str | None) -> None:
    """``path`` (config key ``key``) must be a local directory holding a saved tokenizer: a
    model directory or a tokenizer-only one (``tokenizer.save_pretrained``'s, no config.json)."""
    if path is None:
        return
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise HfsdkError(
            f"{key}={path!r} is not a directory; point it at a local directory made with "
            "tokenizer.save_pretrained (or a model directory), or unset it"
        )
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        raise HfsdkError(
            f"{key}={path!r} holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}); point it "
            "at a directory made with tokenizer.save_pretrained"
        )


def _model_roles(config: Any, spec: Any) -> Iterator[tuple[str, TrainedRoleConfig]]:
    """Each of the algorithm's role sections a backend trains or runs, and each signal's
    scoring model, by config key."""
    for role in spec.role_names:
        section = getattr(config, role, None)
        if isinstance(section, SignalConfig):
            section, role = section.model, f"{role}.model"
        if isinstance(section, TrainedRoleConfig):
            yield role, section


def check_model_dirs(config: Any, spec: Any, prepared: Any) -> None:
    """The ``model_dirs`` preflight check: every role's model and tokenizer paths, when set."""
    for key, section in _model_roles(config, spec):
        check_model_path(f"{key}.model_path", section.model_path)
        check_tokenizer_path(f"{key}.tokenizer_path", section.tokenizer_path)
