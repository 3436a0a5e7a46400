"""``math_verify``: MATH-style answers compared as mathematics, by Hugging Face's ``math-verify``.

The response's answer (``\\boxed{...}`` first, else the last LaTeX or plain
expression) and the reference are parsed into sympy and compared as values:
``\\frac12`` equals ``0.5`` and ``1/2``, ``\\{1,2\\}`` is a set, ``\\sqrt{2}``
stays exact. ``math-verify`` bounds its own parsing with ``SIGALRM``, which only
the main thread may set and which would replace an alarm already set; it is
turned off here and hfsdk's reward deadline (``reward.timeout_s``) bounds the
whole call instead, in whatever thread the reward runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import attrs

from hfsdk import HfsdkError, help_field


@attrs.frozen(kw_only=True)
class MathVerifyConfig:
    """Settings of ``math_verify``."""

    answer_column: str = help_field(
        "Dataset column holding the reference answer (LaTeX or plain: '\\frac12', '0.5').",
        default="answer",
    )
    float_rounding: int = help_field(
        "Decimal places numbers are rounded to before they are compared.",
        default=6,
        validator=attrs.validators.ge(0),
    )
    strict: bool = help_field(
        "math-verify's strict mode: variables and relations must match too (x=1 is not 1).",
        default=True,
    )
    correct_score: float = help_field("Score of a correct answer.", default=1.0)
    incorrect_score: float = help_field("Score of a wrong answer.", default=0.0)
    no_answer_score: float = help_field(
        "Score when no answer can be parsed from the response.", default=0.0
    )


class _NoTimeoutNotice(logging.Filter):
    """Drops math-verify's notice that its timeout is off: hfsdk's deadline is the timeout."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


_NOTICE_FILTER = _NoTimeoutNotice()


def _quiet_timeout_notice() -> None:
    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if _NOTICE_FILTER not in logger.filters:
            logger.addFilter(_NOTICE_FILTER)


def _reference(text: str) -> str:
    """A bare reference (``\\frac12``, ``0.5``) in math mode, so the LaTeX parser reads it."""
    return text if "$" in text or "\\boxed" in text else f"${text}$"


def math_verify(
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    config: MathVerifyConfig | None = None,
    **columns: Sequence[Any],
) -> list[dict[str, float]]:
    """Score 1 (``correct_score``) when the response's answer equals the reference mathematically.

    Also reports ``answer_found`` (the share of responses an answer was parsed from).
    """
    from math_verify import parse, verify

    config = config or MathVerifyConfig()
    if config.answer_column not in columns:
        raise HfsdkError(
            f"math_verify needs the dataset column {config.answer_column!r} with the reference "
            f"answers; columns available: {sorted(columns) or 'none'} (set answer_column)"
        )
    _quiet_timeout_notice()
    results = []
    for response, reference in zip(responses, columns[config.answer_column], strict=True):
        gold = parse(_reference(str(reference)), parsing_timeout=None)  # type: ignore[arg-type]
        answer = parse(response, parsing_timeout=None)  # type: ignore[arg-type]
        if not answer:
            score = config.no_answer_score
        elif gold and verify(
            gold,
            answer,
            float_rounding=config.float_rounding,
            strict=config.strict,
            timeout_seconds=None,
        ):
            score = config.correct_score
        else:
            score = config.incorrect_score
        results.append({"score": score, "answer_found": float(bool(answer))})
    return results
