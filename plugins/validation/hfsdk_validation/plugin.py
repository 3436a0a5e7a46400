"""Hook implementations of the validation plugin."""

from __future__ import annotations

from typing import Any

import hfsdk


@hfsdk.hookimpl
def hfsdk_validate(algorithm: Any, prompts: Any, scorer: Any, trainer_config: Any) -> Any:
    """mean@n, pass@k and maj@k of ``trainer.val_n`` samples per validation prompt."""
    from hfsdk_validation.validation import validate

    return validate(algorithm, prompts, scorer, trainer_config)
