"""Text from outside the model (tool results, environment / agent messages) as plain text.

A context turn is made by rendering a template around such text and tokenizing the
result. Tokenized as one text, a special-token string inside it (a tool printing
``<|im_end|>``, ``<|im_start|>assistant`` or ``<|image_pad|>``) would become the
tokenizer's special id: a tool could end the turn, fake an assistant header or trip a
vision model's image-token count. Here each such string is tokenized as
``tokenizer(s, split_special_tokens=True)`` does (its characters as ordinary text), the
text around it as usual, while the template's own markers stay special.

Only the special-token strings themselves are set apart (as sentinels while rendering),
never a whole content, so the template reads every content as it is; a rendering without
such strings (and its ids) is exactly the plain ``apply_chat_template(tokenize=True)`` one.
Both the tool loop's renderers (:mod:`hfsdk_agents.trajectory`) and the gateway's full
render (:mod:`hfsdk_agents.gateway.rendering`) go through these helpers, so an
incremental turn and a re-rendering of the same conversation agree.
"""

from __future__ import annotations

import re
import secrets
import weakref
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from hfsdk import HfsdkError

MODEL_ROLE = "assistant"


_SPECIALS: weakref.WeakKeyDictionary[Any, tuple[int, tuple[str, ...]]] = weakref.WeakKeyDictionary()
"""Each tokenizer's special strings with its length when they were read: reading them
costs more than rendering a short turn, and they change only as tokens are added."""


def special_strings(tokenizer: Any) -> tuple[str, ...]:
    """The tokenizer's special-token strings: ``all_special_tokens`` and the added tokens
    marked special (Qwen's ``<|im_start|>`` is only the latter), longest first."""
    try:
        size = len(tokenizer)
        known = _SPECIALS.get(tokenizer)
    except TypeError:  # no length or no weak reference: read them each time
        return _read_specials(tokenizer)
    if known is not None and known[0] == size:
        return known[1]
    found = _read_specials(tokenizer)
    _SPECIALS[tokenizer] = (size, found)
    return found


def _read_specials(tokenizer: Any) -> tuple[str, ...]:
    """:func:`special_strings`, read from the tokenizer."""
    found = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found.update(t.content for t in added.values() if getattr(t, "special", False))
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def holds_special(text: Any, specials: Sequence[str]) -> bool:
    """Whether ``text`` (a string) contains one of ``specials``."""
    return isinstance(text, str) and any(s in text for s in specials)


def outside_messages(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the messages whose contents come from outside the model and the prompt:
    tool results, and every non-assistant message after the first assistant turn (an
    environment's or agent's message). The prompt's own messages (before the first
    assistant turn) are rendered as the datasets plugin renders them, and assistant
    turns are the model's text."""
    out: list[int] = []
    answered = False
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == MODEL_ROLE:
            answered = True
        elif role == "tool" or answered:
            out.append(i)
    return out


def ids_of(value: Any) -> list[int]:
    """Token ids from a tokenizer's answer (a list, or transformers 5's ``BatchEncoding``)."""
    if isinstance(value, Mapping):
        value = value["input_ids"]
    return [int(t) for t in value]


def encode_pieces(tokenizer: Any, pieces: Sequence[tuple[str, bool]]) -> list[int]:
    """The ids of ``(text, plain)`` pieces in order, without added BOS/EOS: ``plain``
    pieces with ``split_special_tokens=True``, the others as usual."""
    ids: list[int] = []
    for text, plain in pieces:
        if text:
            ids.extend(
                ids_of(tokenizer(text, add_special_tokens=False, split_special_tokens=plain))
            )
    return ids


def with_added_specials(tokenizer: Any, ids: list[int]) -> list[int]:
    """``ids`` with the BOS/EOS tokens that ``tokenizer(text)`` adds around a text."""
    probe = ids_of(tokenizer("a"))
    bare = ids_of(tokenizer("a", add_special_tokens=False))
    for start in range(len(probe) - len(bare) + 1):
        if probe[start : start + len(bare)] == bare:
            return [*probe[:start], *ids, *probe[start + len(bare) :]]
    return ids


def sentinel(tag: str, index: int) -> str:
    """A stand-in for a special-token string: letters and digits only, so no template
    escapes it and no tokenizer reads a special token in it."""
    return f"HFSDKCONTENT{index}X{tag}"


def stand_ins(specials: Sequence[str]) -> dict[str, str]:
    """A fresh sentinel for each special-token string (``special -> sentinel``); the random
    tag keeps a text from holding one by chance."""
    tag = secrets.token_hex(8)
    return {s: sentinel(tag, k) for k, s in enumerate(specials)}


def mark(text: str, marks: Mapping[str, str]) -> str:
    """``text`` with each special-token string in it (a key of ``marks``, longest first)
    replaced by its sentinel; the rest of the text is left as it is."""
    pattern = re.compile("|".join(re.escape(s) for s in sorted(marks, key=len, reverse=True)))
    return pattern.sub(lambda m: marks[m.group()], text)


def split_at(text: str, back: Mapping[str, str]) -> list[tuple[str, bool]]:
    """``text`` cut at each sentinel (a key of ``back``): the text between them (``plain``
    False) and, for each sentinel, the string it stands for (``plain`` True)."""
    pattern = re.compile("|".join(re.escape(s) for s in back))
    pieces: list[tuple[str, bool]] = []
    at = 0
    for match in pattern.finditer(text):
        pieces += [(text[at : match.start()], False), (back[match.group()], True)]
        at = match.end()
    return [*pieces, (text[at:], False)]


def marked_ids(tokenizer: Any, text: str, marks: Mapping[str, str]) -> list[int]:
    """The ids of ``text`` (holding the sentinels of ``marks``) without added BOS/EOS: the
    text between sentinels as usual, each sentinel's special-token string as plain text."""
    return encode_pieces(tokenizer, split_at(text, {v: k for k, v in marks.items()}))


def unmark(text: str, marks: Mapping[str, str]) -> str:
    """``text`` with the sentinels of ``marks`` put back as their special-token strings."""
    return "".join(piece for piece, _ in split_at(text, {v: k for k, v in marks.items()}))


def format_ids(tokenizer: Any, template: str, content: str, **fields: Any) -> list[int]:
    """The ids of ``template.format(content=content, **fields)`` (the plain rendering of an
    outside text), the special-token strings inside ``content`` tokenized as plain text.

    Without such a string this is ``tokenizer(text)`` as always; with one, each occurrence
    is a sentinel in the formatted text, which is tokenized as usual between sentinels (the
    template's own markers stay special) and each occurrence plain.
    """
    specials = special_strings(tokenizer)
    if not holds_special(content, specials):
        text = template.format(content=content, **fields)
        return ids_of(tokenizer(text, add_special_tokens=False))
    marks = stand_ins(specials)
    return marked_ids(tokenizer, template.format(content=mark(content, marks), **fields), marks)


def template_ids(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    plain: Collection[int],
    add_generation_prompt: bool,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> list[int]:
    """The chat template's ids of ``messages``, the special-token strings inside the
    contents of messages ``plain`` (indices) tokenized as plain text.

    Without such a string this is ``apply_chat_template(tokenize=True)``. With one, the
    template renders the conversation with each such string (not the whole content: a
    template may read a content, e.g. Qwen3's ``startswith('<tool_response>')``) replaced
    by a sentinel; the text is tokenized as usual between sentinels and each sentinel's
    string plain. A template that changes the strings (escapes ``<``, say), or renders
    differently around a sentinel than around the string, is refused: the text with the
    strings put back must be the template's plain rendering.
    """
    extra = {"tools": [dict(t) for t in tools]} if tools else {}
    specials = special_strings(tokenizer)
    marked = [i for i in plain if holds_special(messages[i].get("content"), specials)]

    def render(chat: list[Mapping[str, Any]], tokenize: bool) -> Any:
        return tokenizer.apply_chat_template(
            chat, tokenize=tokenize, add_generation_prompt=add_generation_prompt, **extra
        )

    if not marked:
        return ids_of(render(list(messages), True))
    marks = stand_ins(specials)
    chat = [
        {**m, "content": mark(m["content"], marks)} if i in marked else m
        for i, m in enumerate(messages)
    ]
    framed = str(render(chat, False))
    if unmark(framed, marks) != str(render(list(messages), False)):
        _refuse(messages[marked[0]], marked[0], specials)
    return marked_ids(tokenizer, framed, marks)


def _refuse(message: Mapping[str, Any], index: int, specials: Sequence[str]) -> None:
    held = next(s for s in specials if s in str(message.get("content")))
    raise HfsdkError(
        f"message {index} ({message.get('role')}) holds the special-token text {held!r}, which "
        "must reach the model as plain text, but the chat template does not render that "
        "text as it is (it rewrites it, or renders the content differently once the text "
        "is set apart), so its tokens cannot be told from the template's; set "
        "rollout.multi_turn.renderer: plain, or use a template that inserts message "
        "contents as they are"
    )
