"""``hfsdk reward score``: score rows with one reward function, before a run uses it."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from hfsdk import PROMPT_MESSAGES, HfsdkError, plain_rendering
from hfsdk_rewards.calling import DEFAULT_TIMEOUT_S


@click.group()
def reward() -> None:
    """Check reward functions on a few rows."""


def read_rows(path: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, each with a ``response`` (one line per problem)."""
    file = Path(path)
    if file.is_dir():
        raise HfsdkError(f"--data {path!r} is a directory; expected a JSON-lines file")
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise HfsdkError(f"--data {path!r} does not exist; give a JSON-lines file") from None
    except UnicodeDecodeError:
        raise HfsdkError(f"--data {path!r} is not UTF-8 text; expected JSON lines") from None
    rows = []
    # Only newlines end a row: str.splitlines() would also split at U+2028 or U+0085,
    # which JSON allows unescaped inside a string.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise HfsdkError(
                f"--data {path!r} line {number} is not JSON ({exc.msg}); expected one object "
                'per line, e.g. {"prompt": "...", "response": "...", "answer": "..."}'
            ) from None
        if not isinstance(row, dict) or not isinstance(row.get("response"), str):
            raise HfsdkError(
                f"--data {path!r} line {number} has no 'response' string; expected one object "
                'per line, e.g. {"prompt": "...", "response": "...", "answer": "..."}'
            )
        rows.append(row)
    if not rows:
        raise HfsdkError(f"--data {path!r} holds no rows; expected one JSON object per line")
    return rows


def _messages(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in value
        )
    )


def prompt_text(row: Mapping[str, Any], number: int) -> str:
    """A row's ``prompt`` as a run passes it: a string as it is, chat messages in their plain
    rendering (a run's ``raw_prompt``)."""
    prompt = row.get("prompt", "")
    if isinstance(prompt, str):
        return prompt
    if _messages(prompt):
        return plain_rendering(prompt)
    raise HfsdkError(
        f"--data row {number}: 'prompt' is {json.dumps(prompt)[:80]}; expected a string or chat "
        'messages, e.g. [{"role": "user", "content": "..."}]'
    )


def _plain(value: Any) -> Any:
    """A JSON-safe copy (numbers as floats where not finite-representable, others as text)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value) if math.isfinite(float(value)) else str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return _plain(value.item())
    return str(value)


def score_rows(
    name: str,
    rows: list[dict[str, Any]],
    overrides: tuple[str, ...],
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[dict]:
    """One object per row: ``score`` and the function's other outputs (within ``timeout_s``)."""
    import inspect

    from hfsdk import DeadlineExceeded, apply_overrides, deadline
    from hfsdk_rewards.calling import (
        _as_list,
        _tb_frames,
        check_result,
        invoke,
        locate_failure,
        run_awaitable,
        timeout_error,
    )
    from hfsdk_rewards.composition import load_reward_functions
    from hfsdk_rewards.signatures import signature_problem

    kwargs = apply_overrides({}, overrides)
    [weighted] = load_reward_functions([{"name": name, "kwargs": kwargs}])
    call = weighted.call
    prompts = [prompt_text(row, number) for number, row in enumerate(rows, start=1)]
    responses = [row["response"] for row in rows]
    keys = sorted({k for row in rows for k in row} - {"prompt", "response"})
    columns = {k: [row.get(k) for row in rows] for k in keys}
    # As in a run: the messages reach only a function that names the column. A prompt that
    # is not a string passed prompt_text's check: it is messages.
    columns[PROMPT_MESSAGES] = [
        None if isinstance(row.get("prompt", ""), str) else row["prompt"] for row in rows
    ]
    # As a run's preflight does: a setting the function does not take, or a column it needs
    # that the rows lack, is one line, not a TypeError blamed on the first row's data.
    problem = signature_problem(call, list(columns))
    if problem is not None:
        raise HfsdkError(problem)
    try:
        with deadline(timeout_s, f"reward function {call.label!r}", log_stack=False):
            result = invoke(call, prompts, responses, columns)
            if inspect.isawaitable(result):
                result = run_awaitable(result)
    except DeadlineExceeded as exc:
        frames = _tb_frames(exc)
        raise timeout_error(call.label, timeout_s, "--timeout-s", responses, frames) from None
    except HfsdkError as exc:
        if str(exc).startswith(f"reward function {call.label!r}"):
            raise  # already names the function
        # As a run does: the function's own clear message, prefixed with its name.
        raise locate_failure(call, prompts, responses, columns, exc) from None
    except Exception as exc:
        raise locate_failure(
            call, prompts, responses, columns, exc, timeout_s=timeout_s, timeout_key="--timeout-s"
        ) from exc
    checked = check_result(call.label, result, len(rows))
    out = []
    for score, item in zip(checked.scores, _as_list(call.label, result, len(rows)), strict=True):
        extras = (
            {str(k): _plain(v) for k, v in item.items() if k != "score"}
            if isinstance(item, Mapping)
            else {}
        )
        out.append({"score": score, **extras})
    return out


@reward.command(name="score")
@click.argument("name", metavar="NAME")
@click.option("--data", "data_file", required=True, metavar="ROWS.jsonl", help="Rows to score.")
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds the function may take for all rows (a hang is one line naming it).",
)
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
def score_command(name: str, data_file: str, timeout_s: float, overrides: tuple[str, ...]) -> None:
    """Score each row of ROWS.jsonl (prompt, response and dataset columns) with the reward
    function NAME and its config (KEY=VALUE, values as YAML, dots for nested keys);
    print one JSON object per row: its score and the function's other outputs.

    \b
        hfsdk reward score code_tests --data rows.jsonl limits.wall_s=3
    """
    from hfsdk_sandbox import isolation  # here: the CLI starts without the sandbox's imports
    from hfsdk_sandbox.preflight import sandbox_notice

    rows = read_rows(data_file)
    # As a run's preflight says: without it a sandboxed reward scores 0.0 with no reason given.
    line = sandbox_notice(isolation(), [], [name])
    if line:
        click.echo(line, err=True)
    for row in score_rows(name, rows, overrides, timeout_s):
        click.echo(json.dumps(row))
