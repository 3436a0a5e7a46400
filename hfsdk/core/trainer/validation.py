"""What a validation returns; the validation itself is a plugin's (``hfsdk_validate``)."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class ValidationResult:
    """The metrics of one validation and a few of its samples (prompt, response, score)."""

    metrics: dict[str, float]
    samples: list[dict[str, Any]]
