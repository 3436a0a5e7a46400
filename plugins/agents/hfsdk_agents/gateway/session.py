"""One trajectory's session: the conversation it has seen and the engine's tokens for it.

Every request of a session is matched against the conversation its tokens
already stand for (a :class:`Branch`: the messages rendered so far and the
assistant messages the gateway returned). When the request extends it, only the
new messages are tokenized (the renderer's ``context_turn``, exactly as the tool
loop renders tool and user turns) and appended as context (mask 0); the model's
answer is appended as the engine returned it: its token ids and log-probs,
never decoded and encoded again. When the request does not extend it (the
agent dropped reasoning, summarised, handed off), the branch is closed as a
segment and a new one starts whose prompt is the whole conversation rendered
afresh (:func:`~hfsdk_agents.gateway.rendering.render_conversation`).

``n > 1`` answers make one branch each; the next request continues whichever
branch it extends (the first when the agent stops). A session's state is only
touched from the rollout's event loop, one request at a time.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hfsdk import HfsdkError
from hfsdk_agents.gateway.errors import GatewayError, bad_request
from hfsdk_agents.gateway.messages import Message, check_messages, extends, for_template
from hfsdk_agents.gateway.rendering import (
    PLAIN_TOOL_TEMPLATE,
    render_conversation,
    row_messages,
)
from hfsdk_agents.gateway.responses import (
    Choice,
    call_id,
    chat_completion,
    completion,
    token_bytes,
)
from hfsdk_agents.gateway.sampling import Sampling
from hfsdk_agents.loops import AgentContext
from hfsdk_agents.requests import GenerationRequest, GenerationResult, one_waiter
from hfsdk_agents.trajectory import MODEL_ROLE, PlainRenderer, Segment, Trajectory, shared_prefix

REWRITTEN = "segment"
"""``finish`` of a segment the agent's conversation left (a new segment followed it), as
:meth:`~hfsdk_agents.trajectory.Trajectory.follow` marks one."""


def draw_seed(seed: int, draw: int, slots: int) -> int:
    """The engine seed of a trajectory's ``draw``-th sample.

    Trajectory seeds are ``slots`` (``max_turns``) apart, as the tool loop's turns use them;
    a session draws without bound (``n`` choices, resends, segments), and ``seed + draw``
    past its slots reached the next trajectory's seeds: two trajectories of one group
    sampled the same tokens. Draws past the slots take a hash of both instead.
    """
    if draw < slots:
        return seed + draw
    digest = hashlib.blake2b(f"{seed}:{draw}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % (2**31 - 1)


@attrs.define(kw_only=True)
class Branch:
    """Tokens and what they stand for: ``messages`` (chat), ``text`` (completions by text).
    ``tail``: text the tokens hold past ``text`` (a stop string, which the answer leaves out,
    and the rest of the token that completed it)."""

    trajectory: Trajectory
    messages: list[Message] | None = None
    text: str | None = None
    tail: str = ""
    turns: int = 0

    def fork(self) -> Trajectory:
        """A copy of the trajectory to append to (the branch itself stays as it was)."""
        t = self.trajectory
        return attrs.evolve(t, segments=list(t.segments), extra=dict(t.extra))


@attrs.define(kw_only=True)
class _Start:
    """Where a request continues: the branch, the context ids to add and their role."""

    branch: Branch
    ids: list[int] = attrs.field(factory=list)
    role: str = "user"
    results: list[dict[str, Any]] = attrs.field(factory=list)
    messages: list[Message] | None = None
    text: str | None = None


class Session:
    """The gateway's state for one trajectory (see the module docstring)."""

    def __init__(
        self,
        *,
        ctx: AgentContext,
        prompt_ids: Sequence[int],
        row: Mapping[str, Any],
        seed: int,
        use_template: bool,
        model: str,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.token = secrets.token_urlsafe(16)
        self.ctx = ctx
        self.row = row
        self.seed = seed
        self.use_template = use_template
        self.model = model
        self.loop = loop
        self.prompt_ids = tuple(prompt_ids)
        # The run's tool schemas, which the prompts were rendered with
        # (rollout.multi_turn.tools; checks.prompt_tool_schemas): a request without
        # `tools` is rendered with them, or its later turns would read another prompt.
        self.prompt_tools = [dict(t) for t in ctx.renderer.tools]
        # The context never outgrows the row's: the rollout was sized for prompt + budget.
        self.context_cap = len(self.prompt_ids) + ctx.config.max_response_tokens
        text = row.get("rendered_prompt", row.get("raw_prompt"))
        self.branches = [
            Branch(
                trajectory=Trajectory(prompt_ids=self.prompt_ids),
                messages=row_messages(row),
                text=text if isinstance(text, str) else None,
            )
        ]
        self.closed: list[Trajectory] = []
        self.draws = 0
        self.model_turns = 0  # successful model requests, over every segment
        self.reward: float | None = None
        self.malformed: str | None = None
        self.finish: str | None = None
        self.conversation: list[Message] = []
        self.active = True
        self._lock = asyncio.Lock()
        self._specials = [s for s in getattr(ctx.tokenizer, "all_special_tokens", []) if s]
        self._spaced = _joins_with_spaces(ctx.tokenizer, self._specials)
        # A turn's end token (<|im_end|>, </s>) is not part of what it said; a call's end
        # marker (</tool_call>, a stop token too) is: without it the call is cut short and
        # its echo no longer reads as the model's tokens.
        marker = _call_end_marker(ctx.config.parser)
        self._stop_texts = [
            t
            for t in (ctx.tokenizer.decode([i]) for i in ctx.stop_token_ids)
            if t.strip() and t.strip() != marker
        ]

    # -- what the loop reads at the end ----------------------------------------------------

    @property
    def model_calls(self) -> int:
        """Model turns taken on the branches kept (closed segments and the current one)."""
        return sum(t.turns for t in self.trajectories())

    def trajectories(self) -> list[Trajectory]:
        """The segments in order: closed ones, then the current branch (if the model spoke)."""
        out = list(self.closed)
        current = self.branches[0]
        if current.turns:
            out.append(current.trajectory)
        return out

    # -- requests --------------------------------------------------------------------------

    def check_open(self) -> None:
        """Refuse requests after the trajectory ended."""
        if not self.active:
            raise GatewayError(404, "this session has ended", code="unknown_session")

    async def chat(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/chat/completions``."""
        self.check_open()
        try:
            messages = check_messages(body.get("messages"))
        except GatewayError as err:
            if self.finish is None:  # after budget / max_turns ended it, the trajectory stays
                self.malformed = err.message
            raise
        sampling = Sampling.parse(body, self.ctx)
        tools = body.get("tools") or self.prompt_tools or None
        # Parsed also without `tools` in the request: a run's tools may be in the prompt.
        parse = body.get("tool_choice") != "none"
        async with self._lock:
            start = self._follow_chat(messages, tools)
            made = await self._generate(start, sampling, parse=parse)
            _check_logprobs(made, sampling)
            branches, choices = [], []
            for trajectory, choice in made:
                reply: Message = {"role": "assistant", "content": choice.content}
                if choice.tool_calls:
                    reply["tool_calls"] = [dict(c) for c in choice.tool_calls]
                branches.append(
                    Branch(
                        trajectory=trajectory,
                        messages=[*messages, reply],
                        turns=start.branch.turns + 1,
                    )
                )
                choices.append(choice)
            prompt_tokens = len(made[0][0].context_ids) - len(choices[0].token_ids)
            # The body before the session advances: a turn is kept only once it is answered.
            answer = chat_completion(self.model, prompt_tokens, choices, logprobs=sampling.logprobs)
            self._advance(start, branches)
            self.conversation = list(branches[0].messages or [])
            return answer

    async def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/completions`` (a prompt as text or as token ids)."""
        self.check_open()
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        sampling = Sampling.parse(body, self.ctx, legacy=True)
        async with self._lock:
            if isinstance(prompt, str):
                start = self._follow_text(prompt)
            elif isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
                start = self._follow_ids(self._checked_ids(prompt))
            else:
                raise bad_request(
                    "prompt must be a string or a list of token ids (one prompt per request)",
                    param="prompt",
                )
            made = await self._generate(start, sampling, parse=False)
            _check_logprobs(made, sampling)
            branches = [
                Branch(
                    trajectory=trajectory,
                    text=None if start.text is None else start.text + choice.content,
                    tail=self._tail(choice, sampling),
                    turns=start.branch.turns + 1,
                )
                for trajectory, choice in made
            ]
            choices = [choice for _, choice in made]
            prompt_tokens = len(made[0][0].context_ids) - len(choices[0].token_ids)
            answer = completion(self.model, prompt_tokens, choices, logprobs=sampling.logprobs)
            self._advance(start, branches)
            return answer

    # -- matching the request against the branches -----------------------------------------

    def _follow_chat(self, messages: list[Message], tools: Any) -> _Start:
        for branch in self.branches:
            if branch.messages is None or not extends(messages, branch.messages):
                continue
            new = messages[len(branch.messages) :]
            if branch.turns == 0:
                # The row's prompt ids stand for its messages as rendered with the run's
                # tools: a request with other tools reads another prompt (a new segment).
                prompt = list(branch.trajectory.context_ids)
                if not new and self._renders_as(messages, tools, prompt):
                    return _Start(branch=branch, messages=messages)
                break  # more than the prompt before any answer: render it whole
            rendered = for_template(messages)[len(branch.messages) :]
            try:
                ids = self.ctx.renderer.context_turn(rendered, last_token=_last(branch))
            except HfsdkError:
                break  # this renderer has no form for it: a new segment renders it whole
            if not self._renders_as(messages, tools, [*branch.trajectory.context_ids, *ids]):
                break  # the template renders earlier turns differently (dropped thinking)
            role = "tool" if new and all(m["role"] == "tool" for m in new) else "user"
            results = [_tool_result(m) for m in rendered if m["role"] == "tool"]
            return _Start(branch=branch, ids=ids, role=role, results=results, messages=messages)
        try:
            prompt = render_conversation(
                self.ctx.tokenizer,
                messages,
                use_template=self.use_template,
                tools=tools,
                parser=self.ctx.config.parser,
                tool_template=renderer.template
                if isinstance(renderer := self.ctx.renderer, PlainRenderer)
                else PLAIN_TOOL_TEMPLATE,
            )
        except Exception as err:  # a template that refuses the conversation
            raise bad_request(
                f"the conversation cannot be rendered with the model's chat template ({err})",
                code="malformed_messages",
                param="messages",
            ) from None
        return self._new_segment(prompt, messages=messages)

    def _renders_as(self, messages: list[Message], tools: Any, stream: list[int]) -> bool:
        """Whether a fresh request for ``messages`` would read ``stream``: a chat template
        may render earlier turns otherwise than the engine produced them (a Qwen3-style
        template drops ``<think>`` blocks), and a request must see what the template
        renders, as the tool loop's ``next_segment`` ensures. True without a template
        (the plain rendering is never the stream) or when the template refuses."""
        if not self.use_template:
            return True
        try:
            full = render_conversation(self.ctx.tokenizer, messages, use_template=True, tools=tools)
        except Exception:  # the new-segment path reports a template that refuses
            return True
        return full == stream

    def _follow_text(self, prompt: str) -> _Start:
        for branch in self.branches:
            end = None if branch.text is None else _prefix_end(prompt, branch.text, branch.tail)
            if end is None:
                continue
            suffix = prompt[end:]
            if branch.turns == 0:
                if not suffix:
                    return _Start(branch=branch, text=prompt)
                break
            ids = self.ctx.tokenizer.encode(suffix, add_special_tokens=False) if suffix else []
            return _Start(branch=branch, ids=list(ids), text=prompt)
        ids = self.ctx.tokenizer(prompt)["input_ids"]
        return self._new_segment(list(ids), text=prompt)

    def _checked_ids(self, prompt: list[int]) -> list[int]:
        """``prompt`` when every id is in the tokenizer's vocabulary: an id past the model's
        embedding fails the engine's batched step, and with it every session's request."""
        vocab = len(self.ctx.tokenizer)
        outside = [t for t in prompt if not 0 <= t < vocab]
        if outside:
            raise bad_request(
                f"prompt token id {outside[0]} is outside the vocabulary [0, {vocab}); send "
                "ids the model's tokenizer produced",
                param="prompt",
            )
        return prompt

    def _follow_ids(self, prompt: list[int]) -> _Start:
        for branch in self.branches:
            context = list(branch.trajectory.context_ids)
            if prompt[: len(context)] != context:
                continue
            if branch.turns == 0 and len(prompt) > len(context):
                break
            return _Start(branch=branch, ids=prompt[len(context) :])
        return self._new_segment(prompt)

    def carried(self, prompt: Sequence[int]) -> int:
        """Ids of a segment's prompt after the part it shares with the row's prompt."""
        return len(prompt) - shared_prefix(prompt, self.prompt_ids)

    def _new_segment(
        self, prompt: list[int], *, messages: list[Message] | None = None, text: str | None = None
    ) -> _Start:
        limit = self.ctx.config.max_response_tokens
        if len(prompt) >= self.context_cap or self.carried(prompt) >= limit:
            self.finish = "budget"
            raise GatewayError(
                400,
                f"the conversation is {len(prompt)} tokens, {self.carried(prompt)} of them past "
                f"the row's prompt; a segment holds the row's prompt plus {limit} "
                "(rollout.multi_turn.max_response_tokens)",
                code="context_length_exceeded",
                param="messages",
            )
        trajectory = Trajectory(
            prompt_ids=tuple(prompt), row_prompt=self.prompt_ids, carried=self.carried(prompt)
        )
        fresh = Branch(trajectory=trajectory)
        return _Start(branch=fresh, messages=messages, text=text)

    def _advance(self, start: _Start, branches: list[Branch]) -> None:
        """The request succeeded: its branches replace the old ones (closing one that was left)."""
        self.model_turns += 1
        # An earlier refusal (budget) did not end the trajectory: the agent went on.
        self.finish = None
        if start.branch not in self.branches:  # a new segment: the current branch is left
            current = self.branches[0]
            if current.turns:
                current.trajectory.finish = REWRITTEN
                self.closed.append(current.trajectory)
        self.branches = branches

    # -- generation --------------------------------------------------------------------------

    async def _generate(
        self, start: _Start, sampling: Sampling, *, parse: bool
    ) -> list[tuple[Trajectory, Choice]]:
        ctx, config = self.ctx, self.ctx.config
        if self.model_turns >= config.max_turns:  # over every segment: a resend is a turn
            self.finish = "max_turns"
            raise GatewayError(
                400,
                f"this trajectory has had its rollout.multi_turn.max_turns={config.max_turns} "
                "model turns; end the episode",
                code="max_turns_exceeded",
            )
        base = start.branch.fork()
        if start.ids:
            base.add(
                Segment(
                    role=start.role,
                    token_ids=tuple(start.ids),
                    trainable=False,
                    text=ctx.tokenizer.decode(start.ids, skip_special_tokens=False),
                    tool_results=start.results,
                )
            )
        # A later segment's row carries its prompt's re-rendered part as context in the
        # responses, so that part counts against the budget too.
        budget = min(
            config.max_response_tokens - self.carried(base.prompt_ids) - base.response_length,
            self.context_cap - len(base.context_ids),
        )
        if config.max_tokens_per_turn is not None:
            budget = min(budget, config.max_tokens_per_turn)
        if budget <= 0:
            self.finish = "budget"
            raise GatewayError(
                400,
                "this trajectory's token budget (rollout.multi_turn.max_response_tokens) is "
                "spent; end the episode",
                code="context_length_exceeded",
            )
        if sampling.max_tokens is not None:
            budget = min(budget, sampling.max_tokens)
        stops = tuple(dict.fromkeys([*ctx.stop_token_ids, *sampling.stop_ids(ctx.tokenizer)]))
        requests = []
        for _ in range(sampling.n):
            requests.append(
                GenerationRequest(
                    prompt_ids=base.context_ids,
                    max_new_tokens=budget,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    top_k=ctx.top_k,  # the run's (the OpenAI API has none)
                    greedy=ctx.greedy,
                    seed=draw_seed(self.seed, self.draws, config.max_turns),
                    stop_token_ids=stops,
                )
            )
            self.draws += 1
        with one_waiter():  # the n choices are one trajectory waiting on a turn-batched engine
            results = await asyncio.gather(*(ctx.generate(r) for r in requests))
        return [self._answer(base, r, sampling, parse=parse) for r in results]

    def _tail(self, choice: Choice, sampling: Sampling) -> str:
        """The text ``choice``'s tokens hold past its content: the stop string the answer
        leaves out and the rest of the token that completed it (special tokens aside)."""
        text = self.ctx.tokenizer.decode(list(choice.token_ids), skip_special_tokens=False)
        tail = text[len(sampling.before_stop_string(text)) :]
        for special in self._specials:
            tail = tail.replace(special, "")
        return tail

    def _strip(self, text: str) -> str:
        # Only the special tokens and the end text go: the model's own whitespace stays, as
        # an OpenAI-compatible server returns it, so that the agent's echo of the content
        # re-renders as the stream (a stripped "Sure.\n" would split the trajectory). A
        # word-level decoder's edge spaces are its joins, never the model's (no space tokens).
        for special in self._specials:
            text = text.replace(special, "")
        if self._spaced:
            text = text.strip()
        ended = True
        while ended:
            ended = False
            for stop in self._stop_texts:
                if text.endswith(stop):
                    text, ended = text[: -len(stop)], True
                    if self._spaced:
                        text = text.rstrip()
        return text

    def _answer(
        self, base: Trajectory, result: GenerationResult, sampling: Sampling, *, parse: bool
    ) -> tuple[Trajectory, Choice]:
        tokenizer = self.ctx.tokenizer
        ids, logprobs = list(result.token_ids), list(result.logprobs)
        finish = result.finish_reason
        cut = sampling.cut_at_stop_strings(tokenizer, ids)
        if cut is not None:
            ids, logprobs, finish = ids[:cut], logprobs[:cut], "stop"
        text = tokenizer.decode(ids, skip_special_tokens=False)
        visible = sampling.before_stop_string(text)
        calls: list[dict[str, Any]] = []
        malformed: list[str] = []
        content = self._strip(visible)
        if parse:
            parsed = self.ctx.parser(visible)
            malformed = list(parsed.errors)
            if parsed.calls and not parsed.errors:
                calls = [
                    {"id": call_id(), "name": c.name, "arguments": c.arguments}
                    for c in parsed.calls
                ]
                content = self._strip(parsed.content)
        trajectory = attrs.evolve(base, segments=list(base.segments), extra=dict(base.extra))
        trajectory.add(
            Segment(
                role=MODEL_ROLE,
                token_ids=tuple(ids),
                trainable=True,
                logprobs=tuple(logprobs),
                text=text,
                finish_reason=finish,
                tool_calls=[{"name": c["name"], "arguments": c["arguments"]} for c in calls]
                + [{"malformed": e} for e in malformed],
            )
        )
        reason = "tool_calls" if calls else finish
        choice = Choice(
            content=content,
            tool_calls=tuple(calls),
            finish_reason=reason,
            token_ids=tuple(ids),
            logprobs=tuple(logprobs),
            token_texts=tuple(tokenizer.decode([t], skip_special_tokens=False) for t in ids),
            token_bytes=token_bytes(tokenizer, ids),
        )
        return trajectory, choice


def _check_logprobs(made: Sequence[tuple[Trajectory, Choice]], sampling: Sampling) -> None:
    """Refuse ``logprobs`` when the rollout reported none (``nan``: a ``serving: turn``
    rollout without ``rollout_log_probs``) rather than send numbers JSON cannot hold."""
    if not sampling.logprobs:
        return
    if any(not math.isfinite(lp) for _, choice in made for lp in choice.logprobs):
        raise bad_request(
            "logprobs is not served: this rollout reports no log-probs for its tokens "
            "(rollout.multi_turn.serving=turn without rollout_log_probs); leave logprobs unset",
            param="logprobs",
        )


def _tool_result(message: Mapping[str, Any]) -> dict[str, Any]:
    """A tool message the agent sent back, for the tool metrics and the rollout dump. The
    gateway does not see the tool run: an ``Error...`` answer (the tool loop's convention)
    counts as a failed call."""
    content = str(message.get("content", ""))
    failed = content.lstrip().lower().startswith("error")
    return {
        "name": message.get("name", ""),
        "content": content,
        "ok": not failed,
        "error": "agent_reported" if failed else None,
    }


def _call_end_marker(parser: str) -> str | None:
    """The text that closes a call in ``parser``'s format (as the rollout finds it to stop
    turns at); ``None`` when the parser has none or is not registered."""
    from hfsdk import get_registry
    from hfsdk_agents.parsers import CALL_END_MARKERS

    try:
        entry = get_registry("tool_parsers")[parser]
    except KeyError:
        return CALL_END_MARKERS.get(parser)
    marker = entry.extra.get("end_marker", CALL_END_MARKERS.get(parser))
    return marker.strip() if marker else None


def _joins_with_spaces(tokenizer: Any, specials: list[str]) -> bool:
    """Whether the tokenizer's decoder puts a space between tokens (a word-level one) rather
    than nothing (a byte-level BPE such as Qwen's or Llama's)."""
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    for special in specials if convert is not None else []:
        token_id = convert(special)
        if isinstance(token_id, int):
            both = tokenizer.decode([token_id, token_id], skip_special_tokens=False)
            return both == f"{special} {special}"
    return False


def _prefix_end(text: str, prefix: str, tail: str = "") -> int | None:
    """Where ``prefix`` ends in ``text`` when they agree up to whitespace (the agent joins the
    returned text its own way); ``None`` when ``text`` does not start with it.

    The stream already holds ``prefix``'s trailing whitespace and ``tail`` (what its tokens
    hold past ``prefix``): the part of ``text`` that repeats them is inside the end too, or
    encoding the rest would add a second newline where the agent wrote one.
    """
    at = 0
    for char in prefix:
        if char.isspace():
            continue
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text) or text[at] != char:
            return None
        at += 1
    held = prefix[len(prefix.rstrip()) :] + tail
    if text.startswith(held, at):
        return at + len(held)
    for char in held:  # the whitespace it shares with what the stream holds
        if not char.isspace() or at >= len(text) or text[at] != char:
            break
        at += 1
    return at


def _last(branch: Branch) -> int | None:
    ids = branch.trajectory.context_ids
    return ids[-1] if ids else None
