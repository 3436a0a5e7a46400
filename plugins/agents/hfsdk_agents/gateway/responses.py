"""OpenAI response bodies (chat completions, completions, models) built from model turns."""

from __future__ import annotations

import codecs
import functools
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
    token_bytes: tuple[bytes, ...] = ()
    """Each token's bytes (:func:`token_bytes`); empty: the UTF-8 of ``token_texts``."""

    def raw_bytes(self) -> tuple[bytes, ...]:
        """Each token's bytes, its text's UTF-8 when none were given."""
        if len(self.token_bytes) == len(self.token_texts):
            return self.token_bytes
        return tuple(text.encode("utf-8") for text in self.token_texts)


@functools.cache
def _unicode_to_byte() -> dict[str, int]:
    """The inverse of the byte-level BPE alphabet (each byte a printable character)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {char: byte for byte, char in bytes_to_unicode().items()}


def token_bytes(tokenizer: Any, ids: Sequence[int]) -> tuple[bytes, ...]:
    """The bytes each token stands for. A byte-level BPE token (Qwen's, Llama 3's) may hold
    part of a character, which its decoded text shows as U+FFFD: its bytes come from its
    token string. Other tokenizers, and added tokens, give their decoded text's UTF-8."""
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    # A ByteLevel decoder, alone or in a decoders.Sequence (whose repr names its parts).
    byte_level = decoder is not None and "ByteLevel" in repr(decoder)
    added = getattr(tokenizer, "added_tokens_decoder", {}) if byte_level else {}
    pieces = tokenizer.convert_ids_to_tokens(list(ids)) if byte_level else [None] * len(ids)
    table = _unicode_to_byte()
    out = []
    for token_id, piece in zip(ids, pieces, strict=True):
        if isinstance(piece, str) and token_id not in added and all(c in table for c in piece):
            out.append(bytes(table[c] for c in piece))
        else:
            out.append(tokenizer.decode([token_id], skip_special_tokens=False).encode("utf-8"))
    return tuple(out)


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
                "bytes": list(raw),
                "top_logprobs": [],
            }
            for text, raw, lp in zip(
                choice.token_texts, choice.raw_bytes(), choice.logprobs, strict=True
            )
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
            # Where each token starts in the decoded text: the characters the tokens before
            # it complete (a token holding part of a character adds none until the
            # character's last byte).
            offsets, at = [], 0
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            for raw in choice.raw_bytes():
                offsets.append(at)
                at += len(decoder.decode(raw))
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
