"""Supervised sequences: a prompt and a given response as token ids, with a loss mask.

SFT, DPO and Bradley-Terry reward models all train on *given* responses
rather than sampled ones. This module turns one prompt (a string or chat
messages) and one response (a string or chat messages, possibly several
turns) into the batch layout the workers already use for sampled responses
(``token_ops``' contract): the prompt left-padded, the response right-padded,
and a ``response_mask`` that is 1 on the tokens a loss may train on.

How the text is cut into tokens, so the mask is exact token by token:

- With a chat template, the conversation is rendered message by message
  (``apply_chat_template`` of the first ``k`` messages, with the generation
  prompt before an assistant message), a run of consecutive non-assistant messages
  as one (Qwen's templates put consecutive tool results in one user turn); each
  rendering must extend the one before it. The text an assistant message adds (its
  content and the template's end-of-turn marker) is a *trained* segment, everything else
  (user turns, tool results, the next generation prompt) an untrained one;
  what the template adds after the EOS that ends an assistant turn (Qwen's
  newline after ``<|im_end|>``) is context too, as in an RL rollout.
  An assistant turn's ``tool_calls`` are part of what it adds, so a template that
  renders the turn without them is refused, and so is a tool call without a template.
  So is a template that renders a trained turn without all of its ``content`` (or
  ``reasoning_content``), whitespace aside: one that strips ``<think>…</think>`` from
  assistant turns would train the final answer alone.
- Without a template, the plain rendering of ``hfsdk_datasets.plain_rendering`` is
  the prompt and each response message is its content (non-assistant turns are
  ``role: content`` lines ending in the ``assistant:`` cue, not trained; a reply starts
  right after that cue, as a rollout continues a prompt, and other turns are joined by
  ``"\\n"``).
- Each segment is tokenized on its own and the ids concatenated: that is
  how a rollout produces them too (generation continues from the prompt's
  ids), so the log-probs of a given response and of a sampled one mean the
  same.
- ``append_eos``: the response ends with the tokenizer's EOS token (added,
  and trained, unless the last segment already holds it), so the model
  learns to stop where a rollout stops. When the template ends the last turn
  with the EOS and adds more after it (Qwen's ``<|im_end|>`` and a newline),
  that tail is dropped: a rollout's response ends at its first EOS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from hfsdk import HfsdkError
from hfsdk_datasets import (
    Messages,
    apply_template,
    check_messages,
    plain_rendering,
    refuse_plain_tool_calls,
)

TRAINED_ROLES = frozenset({"assistant"})
"""Roles whose messages are trained on; every other role's tokens are masked out."""


@attrs.frozen(kw_only=True)
class SupervisedSequence:
    """One prompt and its given response as token ids, with the response's loss mask.

    ``loss_mask`` has one entry per ``response_ids`` token: 1 where a loss
    trains on it (assistant tokens), 0 elsewhere (user or tool turns inside a
    multi-turn response).
    """

    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]

    def __attrs_post_init__(self) -> None:
        if len(self.loss_mask) != len(self.response_ids):
            raise ValueError(
                f"loss_mask has {len(self.loss_mask)} entries for {len(self.response_ids)} "
                "response tokens; give one per token"
            )

    @property
    def trained_tokens(self) -> int:
        """How many response tokens a loss trains on."""
        return sum(self.loss_mask)


def as_messages(value: Any, where: str) -> Messages | None:
    """Checked messages when ``value`` is a list of messages, ``None`` when it is a string.

    Anything else (a number, an empty list, a malformed message) is a one-line error naming
    ``where``.
    """
    if isinstance(value, str):
        return None
    return check_messages(value, where)


def _tokens(tokenizer: Any, text: str) -> list[int]:
    # Templates and the plain rendering place special tokens themselves; never add BOS twice.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def _prompt_tokens(tokenizer: Any, text: str, use_template: bool) -> list[int]:
    # The same call PromptLoader makes, so a prompt has the same ids in SFT/DPO and in RL.
    return list(tokenizer(text, add_special_tokens=not use_template)["input_ids"])


def _template_segments(
    tokenizer: Any, prompt: Messages, response: Messages, where: str, tools: Sequence[Any]
) -> tuple[str, list[tuple[str, bool]]]:
    """The prompt text and the response's ``(text, trained)`` segments under the template."""
    extra = {"tools": list(tools)} if tools else {}

    def render(messages: Messages, generation_prompt: bool) -> str:
        return apply_template(
            tokenizer, messages, where, add_generation_prompt=generation_prompt, **extra
        )

    first_trained = bool(response) and response[0]["role"] in TRAINED_ROLES
    prompt_text = render(prompt, first_trained)
    calls = any(m.get("tool_calls") for m in [*prompt, *response])
    segments: list[tuple[str, bool]] = []
    done = prompt_text
    for index, message in enumerate(response):
        trained = message["role"] in TRAINED_ROLES
        following = response[index + 1] if index + 1 < len(response) else None
        if not trained and following is not None and following["role"] not in TRAINED_ROLES:
            # A run of non-assistant messages is one untrained segment, rendered at its end:
            # Qwen's templates put consecutive tool results in one user turn, so the rendering
            # up to the first result is no prefix of the rendering up to the second.
            continue
        if trained and index > 0:
            # The generation prompt before this assistant turn is context, not a target.
            cue = render([*prompt, *response[:index]], True)
            _check_prefix(done, cue, where, index, calls)
            segments.append((cue[len(done) :], False))
            done = cue
        full = render([*prompt, *response[: index + 1]], False)
        _check_prefix(done, full, where, index, calls)
        if message.get("tool_calls"):
            without = {k: v for k, v in message.items() if k != "tool_calls"}
            if render([*prompt, *response[:index], without], False) == full:
                raise HfsdkError(
                    f"{where}: response message {index} calls tools, but the chat template "
                    "renders it without them, so the calls would not be trained; use a "
                    "template that renders tool_calls"
                )
        if trained:
            _check_kept(full[len(done) :], message, where, index)
        segments.append((full[len(done) :], trained))
        done = full
    return prompt_text, segments


def _squeezed(text: str) -> str:
    """``text`` without any whitespace: templates trim or re-space what they render."""
    return "".join(text.split())


def _check_kept(segment: str, message: dict[str, Any], where: str, index: int) -> None:
    """Refuse a trained assistant ``segment`` that lacks part of its ``message``'s text.

    Templates that strip ``<think>…</think>`` from assistant turns (QwQ's, early R1-distill
    ones, the Qwen3 fixture) would otherwise train the final answer alone, silently.
    Whitespace is ignored: a template may trim content or put newlines around reasoning.
    """
    for key in ("content", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and _squeezed(value) not in _squeezed(segment):
            raise HfsdkError(
                f"{where}: the chat template renders assistant response message {index} "
                f"without all of its {key} (templates that strip <think>…</think> reasoning from "
                "assistant turns, as QwQ's does, drop it), so only part of the reply would be "
                "trained; use a chat template that keeps reasoning in assistant turns "
                "(as Qwen3's keeps it in the final turn, the way generation renders it), or put "
                "the reasoning in content as text the template keeps"
            )


def _check_prefix(before: str, after: str, where: str, index: int, tool_calls: bool) -> None:
    if not after.startswith(before):
        # The plain rendering refuses tool calls, so it is no way out for such a row.
        way_out = "" if tool_calls else ", or set data.apply_chat_template=false"
        raise HfsdkError(
            f"{where}: the chat template renders the conversation up to response message "
            f"{index} so that it does not extend the rendering before it, so the trained "
            "tokens cannot be marked exactly; use a template whose renderings of a "
            f"conversation's prefixes are prefixes of each other{way_out}"
        )


def _plain_segments(response: Messages) -> list[tuple[str, bool]]:
    segments: list[tuple[str, bool]] = []
    for index, message in enumerate(response):
        trained = message["role"] in TRAINED_ROLES
        # A non-assistant segment ends with the "assistant:" cue, and a reply after it starts
        # right there, as a rollout continues a prompt; a newline would be trained otherwise.
        after_cue = index > 0 and trained and response[index - 1]["role"] not in TRAINED_ROLES
        # A first turn that is not a reply starts its own line: glued to the prompt's last
        # word it read as part of it ("hiuser: more context").
        sep = "\n" if (index and not after_cue) or (not index and not trained) else ""
        if trained:
            segments.append((sep + message["content"], True))
        else:
            segments.append((f"{sep}{message['role']}: {message['content']}\nassistant:", False))
    return segments


def tokenize_supervised(
    prompt: str | Messages,
    response: str | Messages,
    tokenizer: Any,
    *,
    use_template: bool,
    append_eos: bool = True,
    where: str = "row",
    tools: Sequence[Any] = (),
) -> SupervisedSequence:
    """Token ids of ``prompt`` and ``response`` with the response's loss mask (module docstring).

    ``prompt``: a string or checked messages (the context). ``response``: a
    string (one assistant reply) or checked messages (one or more turns;
    assistant turns are trained). ``use_template``: render with the
    tokenizer's chat template (:func:`hfsdk_datasets.resolve_use_template`).
    ``where`` names the row in error messages. ``tools``: the row's tool schemas (OpenAI
    form), given to the template as its ``tools``.
    """
    reply: Messages = (
        [{"role": "assistant", "content": response}] if isinstance(response, str) else response
    )
    if not reply:
        raise HfsdkError(f"{where}: the response is empty; give it at least one message")
    if not any(m["role"] in TRAINED_ROLES for m in reply):
        raise HfsdkError(
            f"{where}: the response has no assistant message (roles: "
            f"{[m['role'] for m in reply]}), so nothing would be trained; give it an "
            "assistant turn"
        )
    trained = [m for m in reply if m["role"] in TRAINED_ROLES]
    if not any(str(m.get("content") or "").strip() or m.get("tool_calls") for m in trained):
        raise HfsdkError(
            f"{where}: the response's assistant text is empty, so the model would learn to end "
            "its turn at once; give it content or leave the row out"
        )
    if use_template:
        context = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        prompt_text, segments = _template_segments(tokenizer, context, reply, where, tools)
    else:
        refuse_plain_tool_calls([*(prompt if isinstance(prompt, list) else []), *reply], where)
        prompt_text = prompt if isinstance(prompt, str) else plain_rendering(prompt)
        segments = _plain_segments(reply)
    prompt_ids = _prompt_tokens(tokenizer, prompt_text, use_template)
    while not segments[-1][1]:  # turns after the last assistant one: nothing follows to train
        segments.pop()
    eos = tokenizer.eos_token_id
    response_ids: list[int] = []
    mask: list[int] = []
    for text, trained in segments:
        ids = _tokens(tokenizer, text)
        response_ids += ids
        mask += _segment_mask(ids, trained, eos)
    # Checked before the EOS is added: an empty answer would train "stop at once".
    if not any(mask):
        raise HfsdkError(
            f"{where}: the response's assistant text tokenizes to no tokens; give it content"
        )
    if append_eos and eos is not None:
        _end_at_eos(response_ids, mask, _tokens(tokenizer, segments[-1][0]), int(eos))
    return SupervisedSequence(
        prompt_ids=tuple(prompt_ids), response_ids=tuple(response_ids), loss_mask=tuple(mask)
    )


def _segment_mask(ids: list[int], trained: bool, eos: int | None) -> list[int]:
    """The loss mask of one segment's ``ids``: 1 on a trained one's up to its last ``eos``.

    What a template adds after the EOS that ends an assistant turn (Qwen's newline after
    ``<|im_end|>``) is context, 0: a rollout's turn ends at the EOS and the agents' renderer
    puts that text in the next context turn, so SFT/DPO train the tokens RL trains.
    """
    if not trained:
        return [0] * len(ids)
    after = ids[::-1].index(eos) if eos is not None and eos in ids else 0
    return [1] * (len(ids) - after) + [0] * after


def _end_at_eos(response_ids: list[int], mask: list[int], last: list[int], eos: int) -> None:
    """End ``response_ids`` (and ``mask``) with ``eos``, in place, as a rollout's response ends.

    ``last`` is the final segment's ids (the tail of ``response_ids``). A chat template may end
    the turn with the EOS itself and add more after it (Qwen's ``<|im_end|>`` and a newline):
    the response then ends right after that segment's last EOS, because a rollout stops at
    the EOS and never samples the newline, and a reward model is read at the EOS. Otherwise
    the EOS is appended.
    """
    if eos not in last:
        response_ids.append(eos)
        mask.append(1)
        return
    after = last[::-1].index(eos)  # how many tokens follow the segment's last EOS
    if after:
        del response_ids[-after:]
        del mask[-after:]


def split_conversation(messages: Messages, where: str) -> tuple[Messages, Messages]:
    """A whole conversation cut before its first assistant message: ``(prompt, response)``.

    The layout of TRL's and verl's SFT datasets (one ``messages`` column). A
    conversation that starts with the assistant or has none is a one-line error.
    """
    first = next((i for i, m in enumerate(messages) if m["role"] in TRAINED_ROLES), None)
    if first is None or first == 0:
        what = "no assistant message" if first is None else "an assistant message first"
        raise HfsdkError(
            f"{where}: the conversation has {what} (roles: {[m['role'] for m in messages]}); "
            "expected context messages followed by at least one assistant reply"
        )
    return messages[:first], messages[first:]


def collate_supervised(
    sequences: Sequence[SupervisedSequence], pad_token_id: int
) -> dict[str, Any]:
    """The batch tensors of ``sequences`` in the workers' layout (``token_ops``' contract).

    Returns ``prompts`` (B, P) left-padded, ``responses`` (B, R) right-padded,
    ``input_ids`` and ``attention_mask`` (B, P + R), ``position_ids`` counting
    attended tokens, and ``response_mask`` (B, R): the loss mask, 0 on padding.
    ``attention_mask`` is 1 on every real token, trained or not.
    """
    import torch

    if not sequences:
        raise HfsdkError("no sequences to collate; give at least one")
    rows = len(sequences)
    prompt_width = max(len(s.prompt_ids) for s in sequences)
    response_width = max(len(s.response_ids) for s in sequences)
    prompts = torch.full((rows, prompt_width), pad_token_id, dtype=torch.long)
    prompt_attention = torch.zeros((rows, prompt_width), dtype=torch.long)
    responses = torch.full((rows, response_width), pad_token_id, dtype=torch.long)
    response_attention = torch.zeros((rows, response_width), dtype=torch.long)
    response_mask = torch.zeros((rows, response_width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        p, r = len(seq.prompt_ids), len(seq.response_ids)
        if p:
            prompts[row, prompt_width - p :] = torch.tensor(seq.prompt_ids, dtype=torch.long)
            prompt_attention[row, prompt_width - p :] = 1
        responses[row, :r] = torch.tensor(seq.response_ids, dtype=torch.long)
        response_attention[row, :r] = 1
        response_mask[row, :r] = torch.tensor(seq.loss_mask, dtype=torch.long)
    attention = torch.cat([prompt_attention, response_attention], dim=1)
    return {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention,
        "position_ids": (attention.cumsum(dim=1) - 1).clamp(min=0),
        "response_mask": response_mask,
    }
