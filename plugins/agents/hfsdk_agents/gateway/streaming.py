"""``stream: true``: a finished chat completion or completion sent as server-sent events.

A request-level generation returns a whole turn at once, so the events are sent when
the turn has finished, not token by token: per choice, the role, then the content (with
its log-probs when asked) or the tool calls, then the finish reason; the usage as a last
chunk when ``stream_options.include_usage`` asks for it; then ``data: [DONE]``. What
the openai SDK assembles from them equals the unstreamed answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


def _event(chunk: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


def _chat_chunk(body: Mapping[str, Any], choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": body["created"],
        "model": body["model"],
        "choices": choices,
    }


def chat_events(body: Mapping[str, Any], *, include_usage: bool) -> Iterator[str]:
    """The events of a ``chat.completion`` body (see the module docstring)."""
    for choice in body["choices"]:
        index, message = choice["index"], choice["message"]
        # Content "" from the start, so an answer with no visible text assembles to "" too.
        first = {"role": "assistant", "content": ""}
        yield _event(_chat_chunk(body, [{"index": index, "delta": first, "finish_reason": None}]))
        logprobs = choice.get("logprobs")  # sent once, on the first chunk that can carry them
        if message.get("content"):
            part: dict[str, Any] = {
                "index": index,
                "delta": {"content": message["content"]},
                "finish_reason": None,
            }
            if logprobs is not None:
                part["logprobs"], logprobs = logprobs, None
            yield _event(_chat_chunk(body, [part]))
        calls = message.get("tool_calls") or []
        if calls:
            delta = {"tool_calls": [{"index": i, **call} for i, call in enumerate(calls)]}
            part = {"index": index, "delta": delta, "finish_reason": None}
            if logprobs is not None:
                part["logprobs"], logprobs = logprobs, None  # a call's tokens have log-probs too
            yield _event(_chat_chunk(body, [part]))
        last = {
            "index": index,
            "delta": {},
            "finish_reason": choice["finish_reason"],
            "token_ids": choice["token_ids"],
        }
        if logprobs is not None:  # no text and no calls (the turn ended at once)
            last["logprobs"] = logprobs
        yield _event(_chat_chunk(body, [last]))
    if include_usage:
        yield _event({**_chat_chunk(body, []), "usage": body["usage"]})
    yield "data: [DONE]\n\n"


def completion_events(body: Mapping[str, Any], *, include_usage: bool) -> Iterator[str]:
    """The events of a ``text_completion`` body: one chunk per choice, then the usage."""
    head = {k: body[k] for k in ("id", "object", "created", "model")}
    for choice in body["choices"]:
        yield _event({**head, "choices": [choice]})
    if include_usage:
        yield _event({**head, "choices": [], "usage": body["usage"]})
    yield "data: [DONE]\n\n"


def include_usage(request_body: Mapping[str, Any]) -> bool:
    """Whether ``stream_options.include_usage`` asks for a usage chunk."""
    options = request_body.get("stream_options")
    return isinstance(options, Mapping) and bool(options.get("include_usage"))
