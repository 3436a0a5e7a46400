"""The example reward function."""

from __future__ import annotations

from collections.abc import Sequence


def keyword_bonus(
    prompts: Sequence[str], responses: Sequence[str], keyword: Sequence[str], **columns: object
) -> list[float]:
    """1.0 when the response contains the sample's ``keyword`` column (any case), else 0.0."""
    return [
        float(str(word).casefold() in response.casefold())
        for response, word in zip(responses, keyword, strict=True)
    ]
