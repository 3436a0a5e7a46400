"""Built-in reward functions: ``exact_match``, ``format_check``, ``length_penalty``.

``math_verify`` (answers compared as mathematics) is in :mod:`.math_verify_reward`.

Each follows the calling convention of :mod:`hfsdk_rewards.calling` and takes its
settings as ``config=`` (an instance of its attrs config class).
"""

from __future__ import annotations

import logging
import numbers
import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import attrs

from hfsdk import HfsdkError, help_field

logger = logging.getLogger(__name__)


def _regex(_instance: object, attribute: attrs.Attribute, value: str | None) -> None:
    if value is None:
        return
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(
            f"{attribute.name}={value!r} is not a valid regular expression: {exc}"
        ) from None


@attrs.frozen(kw_only=True)
class ExactMatchConfig:
    """Settings of ``exact_match``.

    The answer is the ``match`` (``last`` or ``first``) match of
    ``answer_pattern`` in the response (its first group if it has one). The
    default pattern takes the last number, as in GSM8K-style tasks; another
    common choice is ``'####\\s*(.+)'``. ``extract: boxed`` takes the content of
    ``\\boxed{...}`` instead, nested braces included (``\\boxed{\\frac{1}{2}}``), which
    no regular expression can; ``math_verify`` also compares such answers as values.
    """

    extract: Literal["pattern", "boxed"] = help_field(
        "Where the answer comes from: a match of answer_pattern, or the content of "
        "\\boxed{...} (nested braces balanced).",
        default="pattern",
        validator=attrs.validators.in_(("pattern", "boxed")),
    )

    answer_pattern: str = help_field(
        "Regex of a candidate answer in the response (default: a number).",
        # (?<![\d.])\.\d+: a number written without its leading 0 (.5) is read whole, not
        # as 5; the dot after a digit (1.2.3) or another dot (an ellipsis: "...10" is 10,
        # not .10) still starts no number.
        default=r"-?(?:\d[\d,]*(?:\.\d+)?|(?<![\d.])\.\d+)",
        validator=_regex,
    )
    answer_column: str = help_field(
        "Dataset column holding the reference answer.",
        default="answer",
    )
    reference_pattern: str | None = help_field(
        "Regex applied to the reference column first (e.g. GSM8K's '#### (.*)'); null uses it "
        "as is.",
        default=None,
        validator=_regex,
    )
    """Also extract the reference from the column with this pattern (e.g. GSM8K's '#### 42')."""
    match: Literal["last", "first"] = help_field(
        "Which candidate in the response counts: the last or the first match.",
        default="last",
        validator=attrs.validators.in_(("last", "first")),
    )
    case_sensitive: bool = help_field(
        "Compare text answers case-sensitively.",
        default=False,
    )
    numeric: bool = help_field(
        "Compare as exact numbers when both sides parse (1,000 == 1000.0; no float rounding).",
        default=True,
    )
    """Compare as numbers when both sides parse as numbers ('3.0' = '3', '1,000' = '1000')."""
    correct_score: float = help_field(
        "Score of a correct answer.",
        default=1.0,
    )
    incorrect_score: float = help_field(
        "Score of a wrong answer.",
        default=0.0,
    )
    no_answer_score: float = help_field(
        "Score when the response holds no candidate answer.",
        default=0.0,
    )


DEFAULT_FORMAT_PATTERN = r"<think>.*?</think>\s*<answer>.*?</answer>"
"""``format_check``'s default pattern; it is matched by :func:`_think_answer_full` and
:func:`_think_answer_anywhere`, which give the regex's answers in linear time."""


@attrs.frozen(kw_only=True)
class FormatCheckConfig:
    """Settings of ``format_check``: does the response follow ``pattern``?

    The default asks for ``<think>...</think>`` followed by ``<answer>...</answer>``.
    """

    pattern: str = help_field(
        "Regex the response must match (default: <think>…</think> <answer>…</answer>).",
        default=DEFAULT_FORMAT_PATTERN,
        validator=_regex,
    )
    full_match: bool = help_field(
        "Require the whole response to match (else a match anywhere counts).",
        default=True,
    )
    """Require the whole (stripped) response to match, not just a part of it."""
    match_score: float = help_field(
        "Score when the response matches.",
        default=1.0,
    )
    mismatch_score: float = help_field(
        "Score when it does not.",
        default=0.0,
    )


@attrs.frozen(kw_only=True)
class LengthPenaltyConfig:
    """Settings of ``length_penalty``: a soft penalty for overlong responses (as in DAPO).

    0 up to ``max_length − buffer_length``, then falling linearly to
    ``−penalty`` at ``max_length``, and ``−penalty`` beyond.
    """

    max_length: int = help_field(
        "Length (in unit) at which the penalty reaches its full value (DAPO's overlong shaping).",
        default=512,
        validator=attrs.validators.gt(0),
    )
    buffer_length: int = help_field(
        "Length of the ramp before max_length over which the penalty grows linearly.",
        default=128,
        validator=attrs.validators.ge(0),
    )
    penalty: float = help_field(
        "Full penalty (subtracted) at and beyond max_length.",
        default=1.0,
        validator=attrs.validators.ge(0.0),
    )
    unit: Literal["chars", "words"] = help_field(
        "Measure length in characters or whitespace-separated words.",
        default="chars",
        validator=attrs.validators.in_(("chars", "words")),
    )

    @buffer_length.validator
    def _buffer_fits(self, _attribute: attrs.Attribute, value: int) -> None:
        if value > self.max_length:
            raise ValueError(f"buffer_length={value} exceeds max_length={self.max_length}")


def extract_answer(text: str, pattern: str, match: str = "last") -> str | None:
    """The first or last match of ``pattern`` in ``text`` (group 1 if any), or ``None``."""
    found = list(re.finditer(pattern, text))
    if not found:
        return None
    chosen = found[-1] if match == "last" else found[0]
    return chosen.group(1) if chosen.re.groups else chosen.group(0)


def extract_boxed(text: str, match: str = "last") -> str | None:
    """The content of the first or last ``\\boxed{...}`` (or ``\\fbox``) in ``text``, braces
    balanced (``\\{`` and ``\\}`` are text, not braces), or ``None``."""
    openers = [m.end() - 1 for m in _BOXED.finditer(text)]
    if not openers:
        return None
    closing = _matching_braces(text)
    # A box whose brace never closes holds no answer (the rest of the text is no content).
    found = [text[i + 1 : closing[i]] for i in openers if i in closing]
    if not found:
        return None
    return found[-1] if match == "last" else found[0]


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _matching_braces(text: str) -> dict[int, int]:
    """Each ``{``'s position mapped to its closing ``}``'s, in one pass with a stack.

    Scanning from each box to its closing brace instead cost the text's length per box:
    ``"\\boxed{" * 8000`` (56k characters) took 101 s. A backslash escapes the character
    after it (``\\{`` is text); the ``{`` of a box is never escaped (a letter or a space
    precedes it), so one scan from the start pairs the same braces as one from the box.
    """
    closing: dict[int, int] = {}
    stack: list[int] = []
    for found in _BRACE_OR_ESCAPE.finditer(text):
        token = found.group()
        if token == "{":
            stack.append(found.start())
        elif token == "}" and stack:  # (an escape pair is skipped: its brace is text)
            closing[stack.pop()] = found.start()
    return closing


# A backslash with the character it escapes (any one, so \\ is one pair), or a brace; a
# backslash that ends the text escapes nothing.
_BRACE_OR_ESCAPE = re.compile(r"\\.|[{}]", re.DOTALL)


# Commas group thousands only: `1,000` is 1000, but `1,2,3` or `12,5` is no number.
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _number(text: str) -> Decimal | None:
    """``text`` as an exact number (``1,000``, ``$3.50``, ``\\$3.50``, ``1e3``, ``42,``), or
    ``None``.

    A ``Decimal``, never a float: floats would make ``12345678901234567`` equal
    ``12345678901234568`` (both round to one double). Decimals compare exactly,
    and unlike a ``Fraction`` a huge exponent (``1e999999999``) costs nothing.
    NaN is no number here (it equals nothing), so ``nan`` compares as text.
    A comma other than a thousands separator makes it no number (``1,2,3`` is not 123).
    """
    # A trailing comma is punctuation (`so 42, done` extracts `42,`), not part of the number.
    # LaTeX's escaped dollar (\$18.90) first: dropping only "$" would leave "\18.90".
    text = text.replace("\\$", "").replace("$", "").rstrip(",")
    if "," in text:
        if not _THOUSANDS.fullmatch(text):
            return None
        text = text.replace(",", "")
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return None if value.is_nan() else value


def reference_texts(reference: Any, *, function: str, column: str, index: int) -> list[str]:
    """Sample ``index``'s reference answers as text: none for a missing one (null, NaN or an
    empty list), each element of a list (any of them counts as correct), else the one value.

    Never the ``str()`` of a null or a container: ``"None"`` or ``"['4', 'four']"`` is no
    answer anyone wrote, and a response saying ``None`` would match it. A value that is no
    text or number (a dict, a list inside the list) is refused.
    """
    values = list(reference) if isinstance(reference, (list, tuple)) else [reference]
    texts = []
    for value in values:
        if value is None or (isinstance(value, numbers.Number) and value != value):
            continue  # a missing element (a null in a parquet list, a NaN from pandas or NumPy)
        if not isinstance(value, (str, numbers.Number)):
            nested = isinstance(reference, (list, tuple))
            kind = type(value).__name__ + (" inside a list" if nested else "")
            raise HfsdkError(
                f"{function}: sample {index}'s reference in column {column!r} is a {kind} "
                f"({str(value)[:80]!r}); expected text, a number or a list of them (any one "
                "counts as correct); fix the column, or point answer_column at another"
            )
        texts.append(str(value))
    return texts


def _normalize(text: str, config: ExactMatchConfig) -> str | Decimal:
    text = text.strip().rstrip(".").strip()
    if config.numeric:
        number = _number(text)
        if number is not None:
            return number
    return text if config.case_sensitive else text.casefold()


def exact_match(
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    config: ExactMatchConfig | None = None,
    **columns: Sequence[Any],
) -> list[dict[str, float]]:
    """Score 1 (``correct_score``) when the answer extracted from the response equals the reference.

    The reference is the dataset column ``answer_column``: text or a number, or a list of
    them of which any one counts as correct. Also reports ``answer_found`` (the share of
    responses where the pattern matched) and ``reference_missing`` (the share of samples
    whose reference is null or an empty list: they cannot score ``correct_score``, and one
    warning per batch names the first).
    """
    config = config or ExactMatchConfig()
    if config.answer_column not in columns:
        raise HfsdkError(
            f"exact_match needs the dataset column {config.answer_column!r} with the reference "
            f"answers; columns available: {sorted(columns) or 'none'} (name the column in the "
            "reward function's kwargs: reward.functions=[{name: exact_match, kwargs: "
            "{answer_column: COLUMN}}], or rename the dataset column)"
        )
    results = []
    missing = []
    references = columns[config.answer_column]
    for index, (response, reference) in enumerate(zip(responses, references, strict=True)):
        texts = reference_texts(
            reference, function="exact_match", column=config.answer_column, index=index
        )
        if config.reference_pattern is not None:
            texts = [extract_answer(t, config.reference_pattern, "last") or t for t in texts]
        if not texts:
            missing.append(index)
        if config.extract == "boxed":
            answer = extract_boxed(response, config.match)
        else:
            answer = extract_answer(response, config.answer_pattern, config.match)
        if answer is None:
            score = config.no_answer_score
        elif any(_normalize(answer, config) == _normalize(t, config) for t in texts):
            score = config.correct_score
        else:
            score = config.incorrect_score
        results.append(
            {
                "score": score,
                "answer_found": float(answer is not None),
                "reference_missing": float(not texts),
            }
        )
    if missing:
        logger.warning(
            "exact_match: %d of %d samples have no reference answer in column %r (null or an "
            "empty list), so they cannot score correct_score (first: sample %d); fill in the "
            "references or drop those rows",
            len(missing), len(results), config.answer_column, missing[0],
        )  # fmt: skip
    return results


def format_check(
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    config: FormatCheckConfig | None = None,
    **columns: Sequence[Any],
) -> list[float]:
    """Score 1 (``match_score``) when the response follows a regular expression (``pattern``)."""
    config = config or FormatCheckConfig()
    check: Any
    if config.pattern == DEFAULT_FORMAT_PATTERN:
        check = _think_answer_full if config.full_match else _think_answer_anywhere
    else:  # a user's pattern: run as given (docs/rewards.md warns of catastrophic ones)
        regex = re.compile(config.pattern, re.DOTALL)
        check = regex.fullmatch if config.full_match else regex.search
    return [
        config.match_score if check(response.strip()) else config.mismatch_score
        for response in responses
    ]


# Where the thinking ends and the answer starts. The possessive \s*+ cannot backtrack, and
# the whitespace after one </think> ends before the next: each character is looked at once.
_THINK_THEN_ANSWER = re.compile(r"</think>\s*+<answer>")


def _think_answer_full(text: str) -> bool:
    """``re.fullmatch(DEFAULT_FORMAT_PATTERN, text, re.DOTALL)``, in linear time.

    The regex's lazy ``.*?`` tries every ``</think>`` with every ``</answer>``: on degenerate
    output (``"<think></think><answer>" * 800``, 18k characters) that took 55 s, inside C
    and holding the GIL, so reward.timeout_s could not interrupt it. The text matches when
    it opens with ``<think>``, closes with ``</answer>``, and a ``</think>``, whitespace and
    ``<answer>`` lie between them; the first such junction leaves the most room for the
    answer, so only it needs checking.
    """
    if not (text.startswith("<think>") and text.endswith("</answer>")):
        return False
    junction = _THINK_THEN_ANSWER.search(text, len("<think>"))
    return junction is not None and junction.end() <= len(text) - len("</answer>")


def _think_answer_anywhere(text: str) -> bool:
    """``re.search(DEFAULT_FORMAT_PATTERN, text, re.DOTALL)``, in linear time.

    The earliest ``<think>``, then the earliest junction after it, then any ``</answer>``
    after that: an earlier choice at each step never rules out a later step's.
    """
    opening = text.find("<think>")
    if opening < 0:
        return False
    junction = _THINK_THEN_ANSWER.search(text, opening + len("<think>"))
    return junction is not None and text.find("</answer>", junction.end()) >= 0


def length_penalty(
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    config: LengthPenaltyConfig | None = None,
    **columns: Sequence[Any],
) -> list[float]:
    """Soft penalty for overlong responses: 0 within budget, down to −penalty beyond it."""
    config = config or LengthPenaltyConfig()
    start = config.max_length - config.buffer_length
    scores = []
    for response in responses:
        length = len(response.split()) if config.unit == "words" else len(response)
        if length <= start:
            scores.append(0.0)
        elif length <= config.max_length:
            scores.append(-config.penalty * (length - start) / config.buffer_length)
        else:
            scores.append(-config.penalty)
    return scores
