"""Trajectories as token ids: the model's own tokens and the context put between them.

Token-in-token-out: a :class:`Trajectory` keeps the prompt's ids and then one
:class:`Segment` per turn — the ids the model produced exactly as the rollout
returned them (never decoded and re-encoded) or the ids of a tool / environment
turn. The loss mask is 1 on the model's tokens and 0 on everything else.

Tool turns become tokens through a :class:`TurnRenderer`:

- :class:`ChatTemplateRenderer`: the tokenizer's chat template decides the
  markers. A tool turn's ids are what the template adds after an assistant turn:
  the assistant turn's closing tokens after its end-of-turn token (e.g. Qwen's
  ``\\n`` after ``<|im_end|>``), the tool messages and the next assistant header
  (``<|im_start|>assistant\\n``), all context (mask 0). An end-of-turn token the
  model generated itself is the model's (mask 1); when its turn stopped at the
  call's end marker instead, the template's end-of-turn token opens the context.
- :class:`PlainRenderer` (the documented rendering for tokenizers without a chat
  template): each result as ``<tool_response> CONTENT </tool_response>`` (the
  ``template`` is configurable), tokenized without special tokens.

Text from outside the model (a tool's result, an environment's or agent's message) is
plain text under both: a special-token string in it is tokenized as its characters, never
as the special id (:mod:`hfsdk_agents.content_tokens`).

Step-wise trajectories: when the conversation, rendered again by the template,
is no longer the token stream (a template that drops earlier turns' reasoning),
the trajectory goes on in a new :class:`Trajectory` (:meth:`Trajectory.follow`)
whose prompt is that re-rendering; each becomes its own training row
(``docs/agents.md``, "Step-wise trajectories").
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hfsdk import HfsdkError
from hfsdk_agents.content_tokens import (
    MODEL_ROLE,
    format_ids,
    holds_special,
    mark,
    marked_ids,
    outside_messages,
    special_strings,
    stand_ins,
    template_ids,
)
from hfsdk_agents.tools import ToolOutput


@attrs.define(kw_only=True)
class Segment:
    """One turn's tokens: ``role`` (assistant / tool / user / ...), ids, and whether trained.

    ``logprobs`` (model turns): the sampling log-prob of each token as the rollout
    reported it. ``tool_calls``/``tool_results`` are what the turn asked / answered
    (for the rollout dump), ``text`` is a decoded copy for people to read.
    """

    role: str
    token_ids: tuple[int, ...]
    trainable: bool
    logprobs: tuple[float, ...] = ()
    text: str = ""
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] = attrs.field(factory=list)
    tool_results: list[dict[str, Any]] = attrs.field(factory=list)


@attrs.define(kw_only=True)
class Trajectory:
    """A prompt and the turns after it; ``finish`` says why it ended.

    ``finish``: ``stop`` (the model answered without a tool call), ``length`` (a
    turn hit its token limit), ``max_turns``, ``budget`` (the response token budget),
    ``segment`` (the trajectory goes on in a new segment, see :meth:`follow`) or
    whatever a custom loop sets. ``extra`` holds a custom loop's per-trajectory
    values (e.g. an environment's reward): they reach the trajectory's JSON (the
    ``agent_trajectory`` column and the rollout dump), not columns of their own, so a
    reward function reads them as ``agent_trajectory[i]["extra"]``.

    A later segment of a step-wise trajectory (made by :meth:`follow`) keeps the
    row's prompt in ``row_prompt``; ``carried`` of its ``prompt_ids`` (those after
    the part it shares with ``row_prompt``) are the earlier turns as the template
    renders them again: context at the start of its training row, counted in the
    token budget. ``messages``: the conversation as chat messages when the loop
    keeps it (:meth:`hfsdk_agents.AgentContext.new_trajectory`), else ``None``. ``images``:
    the images of its image tokens (the prompt's, then the tools'), in order
    (:mod:`hfsdk_agents.images`). ``dropped_tool_results``: the results of calls that ran
    but whose tool turn did not fit the budget (the trajectory then ends with ``budget``);
    they have no tokens, but :meth:`tool_stats` counts them.
    """

    prompt_ids: tuple[int, ...]
    segments: list[Segment] = attrs.field(factory=list)
    finish: str = ""
    extra: dict[str, Any] = attrs.field(factory=dict)
    row_prompt: tuple[int, ...] | None = None
    carried: int = 0
    messages: list[dict[str, Any]] | None = None
    images: list[Any] = attrs.field(factory=list)
    dropped_tool_results: list[dict[str, Any]] = attrs.field(factory=list)

    def follow(self, prompt_ids: Sequence[int]) -> Trajectory:
        """The next segment of this trajectory, starting from ``prompt_ids`` (its whole
        context so far, rendered again); this one ends with ``finish='segment'``."""
        self.finish = "segment"
        row_prompt = self.row_prompt if self.row_prompt is not None else self.prompt_ids
        prompt = tuple(prompt_ids)
        return Trajectory(
            prompt_ids=prompt,
            row_prompt=row_prompt,
            carried=len(prompt) - shared_prefix(prompt, row_prompt),
            messages=list(self.messages) if self.messages is not None else None,
            images=list(self.images),
        )

    def add(self, segment: Segment) -> None:
        """Append a turn."""
        self.segments.append(segment)

    @property
    def response_ids(self) -> list[int]:
        """Every id after the prompt (model and context turns)."""
        return [t for s in self.segments for t in s.token_ids]

    @property
    def loss_mask(self) -> list[int]:
        """1 for each model token, 0 for each context token, aligned with :attr:`response_ids`."""
        return [int(s.trainable) for s in self.segments for _ in s.token_ids]

    @property
    def response_logprobs(self) -> list[float]:
        """The rollout's log-prob of each model token (``nan`` unknown), 0 on context tokens."""
        out: list[float] = []
        for segment in self.segments:
            if segment.trainable and len(segment.logprobs) == len(segment.token_ids):
                out.extend(segment.logprobs)
            else:
                out.extend([float("nan") if segment.trainable else 0.0] * len(segment.token_ids))
        return out

    @property
    def context_ids(self) -> tuple[int, ...]:
        """Prompt plus everything so far: the next request's input (token-in)."""
        return (*self.prompt_ids, *self.response_ids)

    @property
    def response_length(self) -> int:
        """Tokens after the prompt."""
        return sum(len(s.token_ids) for s in self.segments)

    @property
    def turns(self) -> int:
        """Model turns."""
        return sum(1 for s in self.segments if s.trainable)

    def tool_stats(self) -> tuple[int, int, float]:
        """(tool calls, failed calls, their total seconds)."""
        # The calls that ran count even where their turn did not fit (a tool's side effects
        # and time are real).
        results = [r for s in self.segments for r in s.tool_results]
        results += self.dropped_tool_results
        errors = sum(1 for r in results if not r.get("ok", False))
        return len(results), errors, sum(float(r.get("seconds", 0.0)) for r in results)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record (segments with role, text, token counts, mask, calls, results)."""
        return {
            "finish": self.finish,
            "prompt_tokens": len(self.prompt_ids),
            **({"carried_tokens": self.carried} if self.carried else {}),
            "segments": [
                {
                    "role": s.role,
                    "text": s.text,
                    "tokens": len(s.token_ids),
                    "token_ids": list(s.token_ids),
                    "trained": s.trainable,
                    "finish_reason": s.finish_reason,
                    "tool_calls": s.tool_calls,
                    "tool_results": s.tool_results,
                }
                for s in self.segments
            ],
            **({"extra": self.extra} if self.extra else {}),
            **(
                {"dropped_tool_results": self.dropped_tool_results}
                if self.dropped_tool_results
                else {}
            ),
        }


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids ``a`` and ``b`` have in common."""
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


class TurnRenderer(abc.ABC):
    """How tool outputs become the token ids of a context turn."""

    tools: tuple[dict[str, Any], ...] = ()
    """The tool schemas the prompts were rendered with (none under the plain rendering)."""

    @abc.abstractmethod
    def tool_turn(self, outputs: Sequence[ToolOutput], *, last_token: int | None) -> list[int]:
        """The ids that follow a model turn whose calls returned ``outputs``.

        ``last_token``: the model turn's last id (a renderer closes the turn itself
        when the model did not end it with the template's end-of-turn token).
        """

    def user_turn(self, text: str, *, last_token: int | None) -> list[int]:
        """The ids of a user / environment message after a model turn (custom loops)."""
        raise HfsdkError(f"{type(self).__name__} does not render user turns")

    def render_conversation(self, messages: list[dict[str, Any]]) -> list[int] | None:
        """The ids of the whole conversation with the next assistant header, as a fresh
        request would render it; ``None`` when this renderer cannot (no template)."""
        return None

    def assistant_message(self, token_ids: Sequence[int]) -> dict[str, Any]:
        """A model turn as the chat message :meth:`render_conversation` reads."""
        raise HfsdkError(
            f"{type(self).__name__} renders conversations but does not say how a model turn "
            "becomes a message; implement assistant_message beside render_conversation"
        )

    def context_turn(
        self, messages: Sequence[Mapping[str, Any]], *, last_token: int | None
    ) -> list[int]:
        """The ids of chat ``messages`` (tool / user ...) after a model turn (the gateway)."""
        raise HfsdkError(f"{type(self).__name__} does not render chat messages")


@attrs.define
class PlainRenderer(TurnRenderer):
    """``template`` per tool result (``{content}``, ``{name}``), tokenized without specials;
    a special-token string inside a content is plain text (its characters)."""

    tokenizer: Any
    template: str = " <tool_response> {content} </tool_response>"
    user_template: str = " {content}"

    def tool_turn(self, outputs: Sequence[ToolOutput], *, last_token: int | None) -> list[int]:
        """One rendered template per output, concatenated."""
        if any(o.images for o in outputs):
            # The loop puts the images' token text (special on purpose) before the content.
            text = "".join(self.template.format(content=o.content, name=o.name) for o in outputs)
            return list(self.tokenizer.encode(text, add_special_tokens=False))
        specials = special_strings(self.tokenizer)
        if not any(holds_special(o.content, specials) for o in outputs):
            # One text, encoded once: the outputs' joins tokenize as they always did.
            text = "".join(self.template.format(content=o.content, name=o.name) for o in outputs)
            return list(self.tokenizer.encode(text, add_special_tokens=False))
        marks = stand_ins(specials)
        text = "".join(
            self.template.format(content=mark(o.content, marks), name=o.name) for o in outputs
        )
        return marked_ids(self.tokenizer, text, marks)

    def user_turn(self, text: str, *, last_token: int | None) -> list[int]:
        """``user_template`` with the text."""
        return format_ids(self.tokenizer, self.user_template, text)

    def context_turn(
        self, messages: Sequence[Mapping[str, Any]], *, last_token: int | None
    ) -> list[int]:
        """Tool messages as ``template``, user messages as ``user_template``, in order."""
        ids: list[int] = []
        for message in messages:
            content, role = str(message.get("content") or ""), message.get("role")
            if role == "tool":
                name = message.get("name", "")
                ids.extend(format_ids(self.tokenizer, self.template, content, name=name))
            elif role == "user":
                ids.extend(format_ids(self.tokenizer, self.user_template, content))
            else:
                raise HfsdkError(
                    f"the plain rendering has no form for a {role!r} message after a model "
                    "turn (only tool and user); use a tokenizer with a chat template"
                )
        return ids


@attrs.define
class ChatTemplateRenderer(TurnRenderer):
    """The tokenizer's chat template decides the markers (see the module docstring).

    The template renders a fixed stand-in conversation (a user turn, an assistant
    turn) followed by the new messages; the ids after the stand-in assistant turn's
    stop token are the turn's ids. Whether the rest of the conversation still renders
    as the token stream is checked at turn boundaries
    (:meth:`hfsdk_agents.AgentContext.next_segment`).
    """

    tokenizer: Any
    stop_ids: tuple[int, ...]
    tools: tuple[dict[str, Any], ...] = ()
    """The tool schemas the prompts were rendered with (the template's ``tools``)."""
    _end: list[int | None] = attrs.field(factory=list, init=False, repr=False)

    def _render(
        self,
        messages: list[dict[str, Any]],
        generation_prompt: bool,
        tools: bool = False,
        plain: Sequence[int] = (),
    ) -> list[int]:
        """The template's ids of ``messages``; the contents of messages ``plain`` (indices:
        text from outside the model) keep special-token strings as plain text."""
        import jinja2  # transformers' chat templates are jinja2 (installed with it)

        try:
            return template_ids(
                self.tokenizer,
                messages,
                plain=plain,
                add_generation_prompt=generation_prompt,
                tools=self.tools if tools else None,
            )
        except jinja2.exceptions.TemplateError as err:
            # A template may refuse a conversation it was not written for (Gemma's and
            # Mistral's refuse a tool turn, or two user turns in a row): say what to do.
            roles = [m.get("role") for m in messages]
            raise HfsdkError(
                f"the tokenizer's chat template refused the conversation (roles {roles}): "
                f"{err}; the template cannot render the agent's turns, so set "
                "rollout.multi_turn.renderer: plain (or use a tokenizer whose template "
                "renders tool and consecutive user turns)"
            ) from None

    def _after_assistant(
        self, messages: list[dict[str, Any]], last_token: int | None, plain: bool = True
    ) -> list[int]:
        user = [{"role": "user", "content": "x"}]
        # ``messages`` follow a model turn: outside text, plain unless the caller says not.
        outside = range(2, 2 + len(messages)) if plain else ()
        chat = [*user, {"role": MODEL_ROLE, "content": "y"}, *messages]
        full = self._render(chat, True, plain=outside)
        # The stand-in assistant turn is found inside ``full`` itself, not in a rendering
        # that ends with it: a template may render the last assistant turn differently
        # from one that a turn follows (Qwen3 gives only the last one an empty
        # ``<think></think>`` block). It starts where ``full`` leaves the rendering of the
        # user turn with the assistant header, and ends at the first stop id after that.
        start = shared_prefix(self._render(user, True), full)
        end = next((i for i in range(start, len(full)) if full[i] in self.stop_ids), None)
        if end is None:
            raise HfsdkError(
                "the chat template's assistant turn ends with none of the stop ids "
                f"{list(self.stop_ids)}; set rollout.multi_turn.stop_token_ids to its end token"
            )
        # The model's own end-of-turn token is its (trained); one it did not produce is context.
        return full[end + 1 :] if last_token == full[end] else full[end:]

    def render_conversation(self, messages: list[dict[str, Any]]) -> list[int]:
        """The template's rendering of ``messages`` (with the tools) and the assistant header;
        tool results and the messages after the first model turn keep special-token strings
        as plain text, as :meth:`context_turn` renders them."""
        return self._render(messages, True, tools=True, plain=outside_messages(messages))

    def end_of_turn(self) -> int | None:
        """The stop id that closes the template's assistant turn (``None``: none of them)."""
        if not self._end:
            base = [{"role": "user", "content": "x"}, {"role": MODEL_ROLE, "content": "y"}]
            ends = [t for t in self._render(base, False) if t in self.stop_ids]
            self._end.append(ends[-1] if ends else None)
        return self._end[0]

    def assistant_message(self, token_ids: Sequence[int]) -> dict[str, Any]:
        """The model's text without the template's end-of-turn token (the template adds it)."""
        ids = list(token_ids)
        if ids and ids[-1] == self.end_of_turn():
            ids = ids[:-1]
        return {"role": MODEL_ROLE, "content": self.tokenizer.decode(ids)}

    def tool_turn(self, outputs: Sequence[ToolOutput], *, last_token: int | None) -> list[int]:
        """The template's tool messages (``role: tool``) and the next assistant header."""
        messages = [{"role": "tool", "name": o.name, "content": o.content} for o in outputs]
        # The loop puts the images' token text (special on purpose) before the content.
        return self._after_assistant(messages, last_token, plain=not any(o.images for o in outputs))

    def user_turn(self, text: str, *, last_token: int | None) -> list[int]:
        """The template's user message and the next assistant header."""
        return self._after_assistant([{"role": "user", "content": text}], last_token)

    def context_turn(
        self, messages: Sequence[Mapping[str, Any]], *, last_token: int | None
    ) -> list[int]:
        """The template's rendering of ``messages`` and the next assistant header."""
        return self._after_assistant([dict(m) for m in messages], last_token)
