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

A message's content may also be TRL's list of parts (``[{"type": "image"}, {"type": "text",
"text": "..."}]``): it becomes one string, each image part the ``<image>`` placeholder of
verl's layout (which the vision rollout expands), the parts joined by spaces.
"""

from __future__ import annotations

import json
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
        calls = _tool_calls(message.get("tool_calls"), f"{where}: message {index}")
        if calls and role == "assistant" and content is None:
            content = ""  # the OpenAI form of a turn that only calls tools
        content = _parts_text(content, f"{where}: message {index} ({role})")
        if not isinstance(content, str):
            raise HfsdkError(
                f"{where}: message {index} ({role}) has no text 'content' (got {content!r}, "
                f"keys: {sorted(map(str, message))}); give every message a string 'content'"
            )
        # Parquet structs give every message every key seen in the column; drop the Nones.
        checked = {k: v for k, v in message.items() if v is not None}
        checked["content"] = content
        checked.pop("tool_calls", None)
        if calls:
            checked["tool_calls"] = calls
        messages.append(checked)
    return messages


IMAGE_PLACEHOLDER = "<image>"
"""What an image content part renders as: verl's placeholder, which a vision rollout expands."""

PARTS_EXPECTED = (
    "write the content as a string ('<image> what is shown?') or as parts "
    "[{'type': 'image'}, {'type': 'text', 'text': '...'}]"
)

SHOWN_CHARS = 200
"""How much of an inline image value an error quotes."""

INLINE_IMAGE_KEYS = ("image", "url", "path")
"""Keys of an image content part that carry the image itself, which a run does not read: the
images come from the row's ``images`` list, one per ``<image>``."""


def inline_image(part: Mapping[str, Any]) -> tuple[str, Any] | None:
    """``(key, value)`` of an image content part that carries its image inline (TRL's
    ``{"type": "image", "image": "x.png"}``, a ``url`` or ``path``), else ``None``.

    Parquet gives every part every key of the column, so a ``None`` value carries nothing.
    """
    for key in INLINE_IMAGE_KEYS:
        value = part.get(key)
        if value is not None and not (isinstance(value, str | bytes) and not value):
            return key, value
    return None


def inline_image_message(where: str, number: int, key: str, value: Any) -> str:
    """The one-line refusal of content part ``number`` carrying its image inline."""
    shown = repr(value)
    if len(shown) > SHOWN_CHARS:  # a base64 data: URI is hundreds of kilobytes
        shown = shown[:SHOWN_CHARS] + "…"
    return (
        f"{where}: content part {number} carries its image inline ({key}={shown}), which is "
        "not read (the part would become a bare '<image>' and the run train on the text "
        "alone); move the image to the row's 'images' list and write the part as "
        "{'type': 'image'}"
    )


def _parts_text(content: Any, where: str) -> Any:
    """TRL's content parts as text: each ``{"type": "image"}`` as ``<image>`` and each
    ``{"type": "text", "text": ...}`` as its text, joined by spaces (as the vision plugin's
    loader renders them); any other content is returned as it is."""
    import numpy as np  # parquet rows hold lists as arrays

    if isinstance(content, np.ndarray):
        content = content.tolist()
    if not isinstance(content, list) or not content:
        return content
    if not all(isinstance(part, Mapping) for part in content):
        return content
    pieces = []
    for number, part in enumerate(content):
        kind, text = part.get("type"), part.get("text")
        if kind == "image":
            inline = inline_image(part)
            if inline is not None:
                raise HfsdkError(inline_image_message(where, number, *inline))
            pieces.append(IMAGE_PLACEHOLDER)
        elif kind == "text" and isinstance(text, str):
            pieces.append(text)
        else:
            # A part with any other type (image_url, video, ...) or no text has no rendering.
            shown = repr({k: v for k, v in part.items() if v is not None})
            if len(shown) > SHOWN_CHARS:  # an image_url part's data: URL is hundreds of KB
                shown = shown[:SHOWN_CHARS] + "…"
            if kind == "image_url":  # OpenAI's layout: say where the image goes instead
                raise HfsdkError(
                    f"{where}: content part {number} is {shown}, an image_url part, which is not "
                    "read; put the image (a path, its bytes or a data: URI) in the row's "
                    "'images' list and write the part as {'type': 'image'}, as in "
                    "[{'type': 'image'}, {'type': 'text', 'text': '...'}]"
                )
            raise HfsdkError(f"{where}: content part {number} is {shown}; {PARTS_EXPECTED}")
    return " ".join(pieces)


def _tool_calls(value: Any, where: str) -> list[dict[str, Any]]:
    """An assistant message's tool calls in the form chat templates read: ``{'type':
    'function', 'function': {'name': ..., 'arguments': {...}}}``, arguments decoded.

    Takes OpenAI's form (arguments a JSON string) and the flat ``{'name', 'arguments'}``.
    """
    if hasattr(value, "tolist") and not isinstance(value, list):
        value = value.tolist()
    if value is None or (isinstance(value, Sequence) and not isinstance(value, str) and not value):
        return []
    expected = "expected [{'type': 'function', 'function': {'name': ..., 'arguments': '{...}'}}]"
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise HfsdkError(f"{where} has tool_calls {value!r}; {expected}")
    calls = []
    for call in value:
        function = call.get("function", call) if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise HfsdkError(
                f"{where} has a tool call without a function name ({call!r}); {expected}"
            )
        arguments = function.get("arguments")
        if arguments is None:  # a tool that takes none
            arguments = {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                raise HfsdkError(
                    f"{where}: the arguments of tool call {name!r} are not JSON ({exc}: "
                    f"{arguments!r}); give a JSON object"
                ) from None
        if not isinstance(arguments, Mapping):
            raise HfsdkError(
                f"{where}: the arguments of tool call {name!r} are {arguments!r}; expected a "
                "JSON object (or its string)"
            )
        entry: dict[str, Any] = {
            "type": "function",
            "function": {"name": name, "arguments": dict(arguments)},
        }
        if isinstance(call, Mapping) and isinstance(call.get("id"), str):
            entry["id"] = call["id"]
        calls.append(entry)
    return calls


def check_tools(value: Any, where: str) -> list[dict[str, Any]]:
    """A row's tool schemas (a list of OpenAI function schemas, or its JSON string, as
    parquet files often hold it) for a chat template's ``tools``; ``None`` gives none."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise HfsdkError(f"{where} is not JSON ({exc}); give a list of tool schemas") from None
    if hasattr(value, "tolist") and not isinstance(value, list):
        value = value.tolist()
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, Mapping) for t in value):
        raise HfsdkError(
            f"{where} is {value!r}; expected a list of tool schemas "
            "[{'type': 'function', 'function': {'name': ..., 'parameters': {...}}}]"
        )
    return [dict(t) for t in value]


def refuse_plain_tool_calls(messages: Sequence[Mapping[str, Any]], where: str) -> None:
    """A one-line error when ``messages`` call tools but are about to get the plain rendering,
    which has no form for a tool call (the calls would vanish from what the model sees)."""
    if any(m.get("tool_calls") for m in messages):
        raise HfsdkError(
            f"{where} has assistant tool calls, which the plain rendering (no chat template) "
            "cannot show; use a tokenizer whose chat template renders tool_calls and keep "
            "data.apply_chat_template on"
        )


def apply_template(tokenizer: Any, messages: Messages, where: str, **options: Any) -> str:
    """``tokenizer.apply_chat_template(messages, tokenize=False, **options)``; a template that
    refuses the messages (``raise_exception``: roles that must alternate, ...) is a one-line
    error naming ``where``."""
    from jinja2 import TemplateError

    try:
        return str(tokenizer.apply_chat_template(messages, tokenize=False, **options))
    except TemplateError as exc:
        raise HfsdkError(
            f"{where}: the chat template refused the messages ({exc}); change the row to what "
            "the template accepts, or set data.apply_chat_template=false"
        ) from None


def render_prompt(
    prompt: str | Messages,
    tokenizer: Any,
    use_template: bool,
    tools: Sequence[Any] = (),
    where: str = "a prompt",
) -> str:
    """The text the model sees for one prompt (a string or checked messages).

    ``tools`` (OpenAI-style schemas of a multi-turn rollout's tools) go to the chat
    template's tools support; the plain rendering shows no schemas. ``where`` names the
    prompt in errors.
    """
    if use_template:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        extra = {"tools": [dict(t) for t in tools]} if tools else {}
        if messages and messages[-1].get("role") == "assistant":
            return _render_prefill(tokenizer, messages, where, extra)
        return apply_template(tokenizer, messages, where, add_generation_prompt=True, **extra)
    if isinstance(prompt, str):
        return prompt
    refuse_plain_tool_calls(prompt, where)  # the plain rendering would drop the calls
    return plain_rendering(prompt)


def _render_prefill(tokenizer: Any, messages: Messages, where: str, extra: dict[str, Any]) -> str:
    """A prompt ending in an assistant message (a prefill): the model continues that message,
    as TRL renders it (``continue_final_message``), rather than starting a new turn after it."""
    try:
        return apply_template(
            tokenizer,
            messages,
            where,
            add_generation_prompt=False,
            continue_final_message=True,
            **extra,
        )
    except HfsdkError:  # a ValueError too: the template refused the messages, already worded
        raise
    except ValueError as exc:  # transformers: the template drops or alters the final message
        reason = str(exc).splitlines()[0]
        raise HfsdkError(
            f"{where} ends with an assistant message the chat template cannot continue "
            f"({reason}); end the prompt with a user message, or use a template that renders "
            "the last assistant message's content as is"
        ) from None
