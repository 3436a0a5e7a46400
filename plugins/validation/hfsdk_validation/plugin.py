"""Hook implementations of the validation plugin."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_validate(algorithm: Any, prompts: Any, scorer: Any, trainer_config: Any) -> Any:
    """mean@n, pass@k and maj@k of ``trainer.val_n`` samples per validation prompt."""
    from hfsdk_validation.validation import validate

    return validate(algorithm, prompts, scorer, trainer_config)


@hfsdk.hookimpl
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """Refuse a ``trainer.val_answer_pattern`` that is not a regular expression."""
    from hfsdk_validation.checks import answer_pattern_problems

    return answer_pattern_problems(config)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``validation_data`` (a warning: validation asked for without validation data)."""
    from hfsdk_validation.checks import NO_VALIDATION_DATA, missing_validation_data

    register(NO_VALIDATION_DATA, missing_validation_data)
