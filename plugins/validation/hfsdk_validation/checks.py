"""The validation plugin's checks before a run: a config it cannot validate with is refused
with the config (``hfsdk_validate_config``), and validation data that is missing or that the
reward functions cannot score is named before any step (preflight checks)."""

from __future__ import annotations

import re
from typing import Any


def answer_pattern_problems(config: Any) -> list[str] | None:
    """An invalid ``trainer.val_answer_pattern``, as a ``hfsdk_validate_config`` message.

    The pattern is compiled only at the first validation, so a typo failed there, after
    training steps, as an internal error; with the config it is one line naming the key.
    """
    pattern = config.trainer.val_answer_pattern
    if pattern is None:
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        return [
            f"trainer.val_answer_pattern={pattern!r} is not a valid regular expression ({exc}); "
            r"fix it (e.g. '<answer>(\d+)</answer>') or set it to null for no maj@k"
        ]
    return None


NO_VALIDATION_DATA = "validation_data"
"""The preflight registry name of :func:`missing_validation_data`."""


def missing_validation_data(config: Any, spec: Any = None, prepared: Any = None) -> str | None:
    """A preflight warning for validation asked for (``trainer.val_every``,
    ``trainer.val_before_train``) in a run without validation data: it never validates.

    A warning, not a refusal: presets (sft, dpo, reward_model) and imported verl configs
    turn validation on, and a run of them on training files alone must still start.
    """
    trainer = config.trainer
    keys = [f"trainer.val_every={trainer.val_every}"] if trainer.val_every > 0 else []
    keys += ["trainer.val_before_train=true"] if trainer.val_before_train else []
    if not keys or prepared is None or prepared.val_loader is not None:
        return None
    return (
        f"validation is asked for ({', '.join(keys)}), but the run has no validation data "
        "(data.val_files is empty), so it will never validate; set data.val_files, or turn "
        "validation off (trainer.val_every=0, trainer.val_before_train=false)"
    )
