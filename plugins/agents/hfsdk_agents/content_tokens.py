"""Text from outside the model (tool results, environment / agent messages) as plain text.

A context turn is made by rendering a template around such text and tokenizing the
result. Tokenized as one text, a special-token string inside it (a tool printing
``<|im_end|>``, ``<|im_start|>assistant`` or ``<|image_pad|>``) would become the
tokenizer's special id: a tool could end the turn, fake an assistant header or trip a
vision model's image-token count. Here such contents are tokenized as
``tokenizer(text, split_special_tokens=True)`` does (their characters as ordinary text)
while the template's own markers stay special.

Only a content that holds a special-token string is treated apart, so every other
rendering (and its ids) is exactly the plain ``apply_chat_template(tokenize=True)`` one.
Both the tool loop's renderers (:mod:`hfsdk_agents.trajectory`) and the gateway's full
render (:mod:`hfsdk_agents.gateway.rendering`) go through these helpers, so an
incremental turn and a re-rendering of the same conversation agree.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from hfsdk import HfsdkError

MODEL_ROLE = "assistant"


def special_strings(tokenizer: Any) -> tuple[str, ...]:
    """The tokenizer's special-token strings: ``all_special_tokens`` and the added tokens
    marked special (Qwen's ``<|im_start|>`` is only the latter)."""
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
    """A stand-in for a content: letters and digits only, so no template escapes it and no
    tokenizer reads a special token in it."""
    return f"HFSDKCONTENT{index}X{tag}"


def split_at(text: str, stand_ins: Mapping[str, str]) -> list[tuple[str, bool]]:
    """``text`` cut at each stand-in (a key of ``stand_ins``): the template's pieces
    (``plain`` False) and, for each stand-in, its content (``plain`` True)."""
    pattern = re.compile("|".join(re.escape(s) for s in stand_ins))
    pieces: list[tuple[str, bool]] = []
    at = 0
    for match in pattern.finditer(text):
        pieces += [(text[at : match.start()], False), (stand_ins[match.group()], True)]
        at = match.end()
    return [*pieces, (text[at:], False)]


def format_ids(tokenizer: Any, template: str, content: str, **fields: Any) -> list[int]:
    """The ids of ``template.format(content=content, **fields)`` (the plain rendering of an
    outside text), its content's special-token strings as plain text.

    A template without special tokens of its own is tokenized whole with
    ``split_special_tokens=True`` (the content reads as it would alone); one with its own
    markers keeps them and only the content is tokenized plain.
    """
    text = template.format(content=content, **fields)
    specials = special_strings(tokenizer)
    if not holds_special(content, specials):
        return ids_of(tokenizer(text, add_special_tokens=False))
    if not holds_special(template.format(content="", **fields), specials):
        return encode_pieces(tokenizer, [(text, True)])
    stand_in = sentinel(secrets.token_hex(8), 0)
    framed = template.format(content=stand_in, **fields)
    return encode_pieces(tokenizer, split_at(framed, {stand_in: content}))


def template_ids(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    plain: Collection[int],
    add_generation_prompt: bool,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> list[int]:
    """The chat template's ids of ``messages``, the contents of messages ``plain`` (indices)
    that hold special-token strings tokenized as plain text.

    Without such a content this is ``apply_chat_template(tokenize=True)``. With one, the
    template is rendered to text with each such content replaced by a stand-in; what the
    template makes of each content (a ``| trim``, a ``tojson``) is read from a rendering
    with that content back in its place. The template's pieces are tokenized as usual and
    the contents plain. A template whose rendering around a content depends on the content
    (or that drops or repeats it) is refused: its ids cannot be told apart.
    """
    extra = {"tools": [dict(t) for t in tools]} if tools else {}
    specials = special_strings(tokenizer)
    marked = [i for i in plain if holds_special(messages[i].get("content"), specials)]
    if not marked:
        return ids_of(
            tokenizer.apply_chat_template(
                list(messages), tokenize=True, add_generation_prompt=add_generation_prompt, **extra
            )
        )
    tag = secrets.token_hex(8)
    stand_ins = {i: sentinel(tag, k) for k, i in enumerate(marked)}

    def render(replaced: Mapping[int, str]) -> str:
        chat = [
            {**m, "content": replaced[i]} if i in replaced else m for i, m in enumerate(messages)
        ]
        return str(
            tokenizer.apply_chat_template(
                chat, tokenize=False, add_generation_prompt=add_generation_prompt, **extra
            )
        )

    framed = render(stand_ins)
    contents: dict[str, str] = {}
    for i, stand_in in stand_ins.items():
        parts = framed.split(stand_in)
        alone = render({j: s for j, s in stand_ins.items() if j != i})
        before, after = parts[0], parts[-1]
        if (
            len(parts) != 2
            or not alone.startswith(before)
            or not alone.endswith(after)
            or len(alone) < len(before) + len(after)
        ):
            _refuse(messages[i], i, specials)
        contents[stand_in] = alone[len(before) : len(alone) - len(after)]
    pieces = split_at(framed, contents)
    if "".join(text for text, _ in pieces) != render({}):
        _refuse(messages[marked[0]], marked[0], specials)
    return encode_pieces(tokenizer, pieces)


def _refuse(message: Mapping[str, Any], index: int, specials: Sequence[str]) -> None:
    held = next(s for s in specials if s in str(message.get("content")))
    raise HfsdkError(
        f"message {index} ({message.get('role')}) holds the special-token text {held!r}, which "
        "must reach the model as plain text, but the chat template does not render that "
        "content as one piece independent of the rest (it drops, repeats or rewrites it "
        "with its surroundings), so its tokens cannot be told from the template's; set "
        "rollout.multi_turn.renderer: plain, or use a template that inserts message "
        "contents as they are"
    )
