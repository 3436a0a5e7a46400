"""OpenAI response bodies (chat completions, completions, models) built from model turns."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class Choice:
    """One sampled answer: its text, tool calls, finish reason, and the engine's tokens."""

    content: str
    tool_calls: tuple[dict[str, Any], ...]
    finish_reason: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    token_texts: tuple[str, ...]


def call_id() -> str:
    """A fresh tool-call id."""
    return f"call_{uuid.uuid4().hex[:24]}"


def wire_tool_calls(calls: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls as the API sends them (arguments as a JSON string)."""
    return [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for c in calls
    ]


def _usage(prompt_tokens: int, choices: Sequence[Choice]) -> dict[str, int]:
    completion = sum(len(c.token_ids) for c in choices)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }


def _token_logprobs(choice: Choice) -> dict[str, Any]:
    return {
        "content": [
            {
                "token": text,
                "logprob": lp,
                "bytes": list(text.encode("utf-8")),
                "top_logprobs": [],
            }
            for text, lp in zip(choice.token_texts, choice.logprobs, strict=True)
        ]
    }


def chat_completion(
    model: str, prompt_tokens: int, choices: Sequence[Choice], *, logprobs: bool
) -> dict[str, Any]:
    """A ``chat.completion`` body. Each choice also carries ``token_ids`` (the engine's)."""
    body_choices = []
    for index, choice in enumerate(choices):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": choice.content if choice.content or not choice.tool_calls else None,
        }
        if choice.tool_calls:
            message["tool_calls"] = wire_tool_calls(choice.tool_calls)
        body_choices.append(
            {
                "index": index,
                "message": message,
                "finish_reason": choice.finish_reason,
                "logprobs": _token_logprobs(choice) if logprobs else None,
                "token_ids": list(choice.token_ids),
            }
        )
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": body_choices,
        "usage": _usage(prompt_tokens, choices),
    }


def completion(
    model: str, prompt_tokens: int, choices: Sequence[Choice], *, logprobs: bool
) -> dict[str, Any]:
    """A ``text_completion`` body (legacy completions)."""
    body_choices = []
    for index, choice in enumerate(choices):
        lp = None
        if logprobs:
            offsets, at = [], 0
            for text in choice.token_texts:
                offsets.append(at)
                at += len(text)
            lp = {
                "tokens": list(choice.token_texts),
                "token_logprobs": list(choice.logprobs),
                "top_logprobs": None,
                "text_offset": offsets,
            }
        body_choices.append(
            {
                "index": index,
                "text": choice.content,
                "finish_reason": choice.finish_reason,
                "logprobs": lp,
                "token_ids": list(choice.token_ids),
            }
        )
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": body_choices,
        "usage": _usage(prompt_tokens, choices),
    }


def models(model: str) -> dict[str, Any]:
    """The ``/v1/models`` list: the policy being trained."""
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "hfsdk"}],
    }
