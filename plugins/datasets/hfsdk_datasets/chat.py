"""Chat-format prompts: checking a list of messages and turning it into the text a model sees.

A prompt column may hold a plain string or a list of messages
(``[{"role": "user", "content": "..."}]``), the layout verl's preprocessing
scripts and TRL's conversational datasets write. With a chat template the
messages go through ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``.
Without one they get the *plain rendering* (documented in ``docs/migrating.md``):

- a lone user message renders as its content alone (``"3 + 5 ="``);
- anything else renders as one ``role: content`` line per message, followed
  by an ``assistant:`` line that cues the response (the plain counterpart of
  ``add_generation_prompt=True``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk import HfsdkError, plain_rendering

Messages = list[dict[str, Any]]


def is_messages(value: Any) -> bool:
    """Whether a prompt cell holds a list of chat messages rather than a string.

    numpy arrays count as lists (parquet readers may give them).
    """
    if isinstance(value, str | bytes | Mapping):
        return False
    if hasattr(value, "tolist") and not isinstance(value, list):
        value = value.tolist()
    return isinstance(value, Sequence) and len(value) > 0 and isinstance(value[0], Mapping)


def check_messages(value: Any, where: str) -> Messages:
    """The messages of one prompt cell as plain dicts; a malformed cell is a one-line error.

    ``where`` names the cell for the message (e.g. ``"row 3 of column 'prompt'"``).
    """
    if hasattr(value, "tolist") and not isinstance(value, list):
        value = value.tolist()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence) or not value:
        raise HfsdkError(
            f"{where} is {value!r}; expected a string or a non-empty list of messages "
            "[{'role': 'user', 'content': '...'}]"
        )
    messages: Messages = []
    for index, message in enumerate(value):
        if not isinstance(message, Mapping):
            raise HfsdkError(
                f"{where}: message {index} is {message!r}; expected a dict with 'role' and "
                "'content'"
            )
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role:
            raise HfsdkError(
                f"{where}: message {index} has no 'role' (keys: {sorted(map(str, message))}); "
                "expected e.g. {'role': 'user', 'content': '...'}"
            )
        if not isinstance(content, str):
            raise HfsdkError(
                f"{where}: message {index} ({role}) has no text 'content' (got {content!r}, "
                f"keys: {sorted(map(str, message))}); give every message a string 'content'"
            )
        # Parquet structs give every message every key seen in the column; drop the Nones.
        messages.append({k: v for k, v in message.items() if v is not None})
    return messages


def render_prompt(
    prompt: str | Messages, tokenizer: Any, use_template: bool, tools: Sequence[Any] = ()
) -> str:
    """The text the model sees for one prompt (a string or checked messages).

    ``tools`` (OpenAI-style schemas of a multi-turn rollout's tools) go to the chat
    template's tools support; the plain rendering shows no schemas.
    """
    if use_template:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        extra = {"tools": [dict(t) for t in tools]} if tools else {}
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **extra
        )
    return prompt if isinstance(prompt, str) else plain_rendering(prompt)
