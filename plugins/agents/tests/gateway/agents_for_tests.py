"""Agents the gateway tests load by file path (``path/agents_for_tests.py:NAME``)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai

SEEN: list[Any] = []
"""What the agents saw (responses, errors), for the tests to read."""


def _client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)


def _ask(base_url: str, row: dict[str, Any]) -> Any:
    return _client(base_url).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": row["raw_prompt"]}]
    )


def by_prompt(base_url: str, row: dict[str, Any]) -> float | None:
    """Behaves as the prompt says: ok, raise, hang, silent, malformed, infinite, post nan,
    posted."""
    prompt = row["raw_prompt"]
    if prompt.startswith("raise"):
        _ask(base_url, row)
        raise RuntimeError("the agent broke")
    if prompt.startswith("hang"):
        _ask(base_url, row)
        time.sleep(60)
        return 1.0
    if prompt.startswith("silent"):
        return 1.0
    if prompt.startswith("malformed"):
        _ask(base_url, row)
        try:
            _client(base_url).chat.completions.create(
                model="policy", messages=[{"role": "wizard", "content": "x"}]
            )
        except openai.BadRequestError as err:
            SEEN.append(err)
        return 1.0
    if prompt.startswith("infinite"):
        _ask(base_url, row)
        return float("inf")
    if prompt.startswith("post nan"):
        _ask(base_url, row)
        # The openai SDK will not send NaN; other HTTP clients do (JSON parsers accept it).
        SEEN.append(httpx.post(f"{base_url}/reward", content=b'{"reward": NaN}'))
        return None
    if prompt.startswith("posted"):
        _ask(base_url, row)
        _client(base_url).post("/reward", body={"reward": 0.25}, cast_to=object)
        return None
    _ask(base_url, row)
    return 0.75


async def async_agent(base_url: str, row: dict[str, Any]) -> float:
    """An ``async`` agent on ``openai.AsyncOpenAI``."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    reply = await client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": row["raw_prompt"]}]
    )
    SEEN.append(reply)
    return 0.5


def exits(base_url: str, row: dict[str, Any]) -> float:
    """Ends as a script would, after one model call: ``sys.exit()``, or ``sys.exit(3)`` when
    the prompt starts with "fail"."""
    import sys

    _ask(base_url, row)
    sys.exit(3 if row["raw_prompt"].startswith("fail") else None)
