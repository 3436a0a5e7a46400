"""Token ids of a whole conversation: a segment's prompt.

A segment's prompt is the only place the gateway renders more than new
messages: the first request of a trajectory (when it is not the dataset row's
own prompt, whose ids are used as they are) and a conversation whose earlier
turns the agent changed. With a chat template it is the template's rendering
with ``add_generation_prompt``; without one, the plain rendering the prompt
datasets use (docs/migrating.md): a lone user message is its text, anything
else ``role: content`` lines and ``assistant:``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk_agents.gateway.messages import Message, for_template


def _ids(value: Any) -> list[int]:
    if isinstance(value, Mapping):  # transformers 5 may return a BatchEncoding
        value = value["input_ids"]
    return [int(t) for t in value]


def render_conversation(
    tokenizer: Any,
    messages: Sequence[Message],
    *,
    use_template: bool,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> list[int]:
    """The ids the model reads before answering ``messages`` (see the module docstring)."""
    if use_template:
        extra = {"tools": [dict(t) for t in tools]} if tools else {}
        return _ids(
            tokenizer.apply_chat_template(
                for_template(messages), tokenize=True, add_generation_prompt=True, **extra
            )
        )
    if len(messages) == 1 and messages[0]["role"] == "user":
        text = messages[0]["content"]
    else:
        lines = [f"{m['role']}: {m['content']}" for m in messages]
        text = "\n".join([*lines, "assistant:"])
    return _ids(tokenizer(text)["input_ids"])


def row_messages(row: Mapping[str, Any]) -> list[Message] | None:
    """The dataset row's prompt as checked messages (``prompt_messages``, else ``raw_prompt``
    as one user message); ``None`` when the row has neither."""
    messages = row.get("prompt_messages")
    if messages is not None:
        if hasattr(messages, "tolist") and not isinstance(messages, list):
            messages = messages.tolist()
        return [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in messages]
    raw = row.get("raw_prompt")
    return None if raw is None else [{"role": "user", "content": str(raw)}]
