"""Agent loops: what happens between a prompt and a finished trajectory.

An agent loop is one class with one async method, :meth:`AgentLoop.run`, called
once per trajectory; many run concurrently against the rollout's request-level
generation. Loops are registered by name (``hfsdk_register_agent_loops``) and
chosen with ``rollout.multi_turn.agent_loop``. The :class:`AgentContext` a loop
gets does the token bookkeeping (model turns, tool turns, user turns, the budget),
so a loop only decides what comes next. The built-in :class:`ToolLoop`
(``tool_loop``): generate → parse tool calls → run them concurrently → append
their outputs → generate, until the model answers without a call, ``max_turns``
or the token budget.

Step-wise trajectories: :meth:`AgentContext.new_trajectory` keeps the conversation
as chat messages beside the tokens, and :meth:`AgentContext.next_segment`, called
at a turn boundary, renders it again; where the template renders it differently
from the token stream (e.g. it drops earlier turns' reasoning), the trajectory
goes on in a new segment whose prompt is that rendering, which a fresh request
would see. :meth:`AgentLoop.run` then returns the segments, in order.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hfsdk import PROMPT_MESSAGES, HfsdkError
from hfsdk_agents.config import MultiTurnConfig
from hfsdk_agents.images import ImageRequest, ImageTurns
from hfsdk_agents.parsers import ParsedTurn, ToolCall, ToolParser
from hfsdk_agents.requests import Generate, GenerationRequest
from hfsdk_agents.tool_worker import ToolWorkers
from hfsdk_agents.tools import Tool, ToolOutput, call_tool
from hfsdk_agents.trajectory import MODEL_ROLE, Segment, Trajectory, TurnRenderer


@attrs.define(kw_only=True)
class AgentContext:
    """What a loop may use: generation, tools, the parser, the renderer and the limits.

    One context serves every trajectory of a rollout call; ``temperature``,
    ``top_p``, ``top_k`` and ``greedy`` are the call's sampling settings.
    """

    generate: Generate
    tokenizer: Any
    tools: Mapping[str, Tool]
    parser: ToolParser
    renderer: TurnRenderer
    config: MultiTurnConfig
    stop_token_ids: tuple[int, ...]
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    greedy: bool = False
    applies_sampling: bool = True
    """Whether ``generate`` samples with a request's own ``temperature`` and ``top_p`` (a
    turn-batching server samples every turn with the rollout's)."""
    tool_workers: ToolWorkers | None = None
    """The tool set's worker process (every call runs there, killed at its deadline);
    ``None``: a worker per call."""
    images: ImageTurns | None = None
    """The rollout, when it can carry images in trajectories (:mod:`hfsdk_agents.images`)."""

    def remaining(self, trajectory: Trajectory) -> int:
        """Tokens the trajectory may still add (a later segment's carried context counts)."""
        return self.config.max_response_tokens - trajectory.carried - trajectory.response_length

    def new_trajectory(self, prompt_ids: Sequence[int], row: Mapping[str, Any]) -> Trajectory:
        """The trajectory of ``prompt_ids``, keeping its conversation as messages when the
        renderer can render it again and that rendering is the prompt (else no messages,
        and :meth:`next_segment` never splits it).

        The messages are the row's ``prompt_messages`` (a chat prompt) or its
        ``raw_prompt`` as one user message. A prompt with images keeps them
        (:class:`ImageTurns`) and no messages.
        """
        trajectory = Trajectory(prompt_ids=tuple(prompt_ids))
        if self.images is not None:
            trajectory.images = list(self.images.row_images(row))
            if trajectory.images:
                return trajectory
        messages = row.get(PROMPT_MESSAGES)
        if messages is None and isinstance(row.get("raw_prompt"), str):
            messages = [{"role": "user", "content": row["raw_prompt"]}]
        if messages is None:
            return trajectory
        messages = [dict(m) for m in messages]
        rendered = self.renderer.render_conversation(messages)
        if rendered is not None and tuple(rendered) == trajectory.prompt_ids:
            trajectory.messages = messages
        return trajectory

    def next_segment(self, trajectory: Trajectory) -> Trajectory | None:
        """At a turn boundary: ``trajectory`` itself while its token stream is what the
        template renders for its messages, else a new segment starting from that
        rendering (:meth:`Trajectory.follow`); ``None`` (finish ``budget``) when the new
        segment's carried context leaves no budget."""
        if trajectory.messages is None:
            return trajectory
        rendered = self.renderer.render_conversation(trajectory.messages)
        if rendered is None or tuple(rendered) == trajectory.context_ids:
            return trajectory
        following = trajectory.follow(rendered)
        if self.remaining(following) <= 0:
            trajectory.finish = "budget"
            return None
        return following

    async def model_turn(
        self, trajectory: Trajectory, *, seed: int | None = None
    ) -> tuple[Segment, ParsedTurn] | None:
        """Generate one model turn, append it and return it with its parsed tool calls.

        ``None`` when the budget is spent (the trajectory then ends with ``budget``). A turn
        cut at the trajectory's budget (it used all that was left, not cut sooner by
        ``max_tokens_per_turn`` or the rollout's own max_response_length) finishes
        ``budget``, the segment and the trajectory, not ``length``: the budget ended it.
        """
        remaining = self.remaining(trajectory)
        budget = remaining
        if self.config.max_tokens_per_turn is not None:
            budget = min(budget, self.config.max_tokens_per_turn)
        if budget <= 0:
            trajectory.finish = "budget"
            return None
        settings = {
            "prompt_ids": trajectory.context_ids,
            "max_new_tokens": budget,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,  # (dropped, a request-serving rollout sampled without it)
            "greedy": self.greedy,
            "seed": seed,
            "stop_token_ids": self.stop_token_ids,
        }
        images = tuple(trajectory.images)
        request = ImageRequest(**settings, images=images) if images else None
        result = await self.generate(request or GenerationRequest(**settings))
        text = self.tokenizer.decode(list(result.token_ids), skip_special_tokens=False)
        parsed = self.parser(text)
        finish_reason = result.finish_reason
        # Cut by the trajectory's budget: the segment says so too, as loops finish the
        # trajectory with their last turn's reason (agent/budget_finish_share counts it).
        # Only a turn that used all that was left: one cut sooner, by max_tokens_per_turn or
        # the rollout's own max_response_length, is a length cut with budget left over.
        cut_by_budget = finish_reason == "length" and len(result.token_ids) >= remaining
        if cut_by_budget:
            finish_reason = trajectory.finish = "budget"
        segment = Segment(
            role=MODEL_ROLE,
            token_ids=tuple(result.token_ids),
            trainable=True,
            logprobs=tuple(result.logprobs),
            text=text,
            finish_reason=finish_reason,
            # In the turn's order, as the tool turn answers them.
            tool_calls=[
                {"name": i.name, "arguments": i.arguments}
                if isinstance(i, ToolCall)
                else {"malformed": i}
                for i in parsed.items
            ],
        )
        trajectory.add(segment)
        if trajectory.messages is not None:
            trajectory.messages.append(self.renderer.assistant_message(result.token_ids))
        return segment, parsed

    async def run_tools(self, parsed: ParsedTurn) -> list[ToolOutput]:
        """Every call of the turn, concurrently; malformed calls answered with their error.

        The outputs follow the turn's order (``parsed.items``): the call formats have no
        ids, so the n-th result answers the n-th call.
        """

        async def answer(item: ToolCall | str) -> ToolOutput:
            if not isinstance(item, ToolCall):
                return ToolOutput(
                    name="", content=f"Error: {item}", ok=False, error="malformed_call"
                )
            return await call_tool(
                self.tools,
                item.name,
                item.arguments,
                timeout_s=self.config.tool_timeout_s,
                max_output_chars=self.config.max_tool_output_chars,
                runner=self.tool_workers,
            )

        return list(await asyncio.gather(*(answer(item) for item in parsed.items)))

    def _append_context(
        self, trajectory: Trajectory, role: str, ids: list[int], results: list[dict[str, Any]]
    ) -> bool:
        if len(ids) > self.remaining(trajectory):
            trajectory.finish = "budget"
            return False
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        trajectory.add(
            Segment(
                role=role, token_ids=tuple(ids), trainable=False, text=text, tool_results=results
            )
        )
        return True

    @staticmethod
    def _last_token(trajectory: Trajectory) -> int | None:
        ids = trajectory.segments[-1].token_ids if trajectory.segments else ()
        return ids[-1] if ids else None

    def add_tool_turn(self, trajectory: Trajectory, outputs: Sequence[ToolOutput]) -> bool:
        """Append the tool outputs as a context turn; ``False`` (finish ``budget``) if too long
        (the calls ran: their results go to ``trajectory.dropped_tool_results``).

        A tool's images come before its text, as their image tokens; the trajectory keeps
        them (and from then on no messages: a template cannot render image tokens again).
        """
        images = [image for o in outputs for image in o.images]
        rendered = [self._with_image_text(o) for o in outputs] if images else outputs
        ids = self.renderer.tool_turn(rendered, last_token=self._last_token(trajectory))
        results = [o.record() for o in outputs]
        if trajectory.messages is not None:
            trajectory.messages.extend(
                {"role": "tool", "name": o.name, "content": o.content} for o in outputs
            )
        if not self._append_context(trajectory, "tool", ids, results):
            # The tools already ran (the output's length is known only then): keep their
            # results so the metrics count the calls, though their tokens do not fit.
            trajectory.dropped_tool_results.extend(results)
            return False
        if images:
            trajectory.images.extend(images)
            trajectory.messages = None
        return True

    def _with_image_text(self, output: ToolOutput) -> ToolOutput:
        """``output`` with its images' token text before its content."""
        if not output.images:
            return output
        if self.images is None:
            raise HfsdkError(
                f"tool {output.name!r} returned {len(output.images)} image(s) but the rollout "
                "generates from text only (it does not implement hfsdk_agents.images."
                "ImageTurns); use rollout.backend=hf_vision or return text"
            )
        text = "".join(self.images.image_text(image) for image in output.images)
        return attrs.evolve(output, content=text + output.content)

    def add_user_turn(self, trajectory: Trajectory, text: str) -> bool:
        """Append a user / environment message; ``False`` (finish ``budget``) if too long."""
        ids = self.renderer.user_turn(text, last_token=self._last_token(trajectory))
        if trajectory.messages is not None:
            trajectory.messages.append({"role": "user", "content": text})
        return self._append_context(trajectory, "user", ids, [])


class AgentLoop(abc.ABC):
    """One trajectory per :meth:`run` call; subclass it for a custom loop (a game, a user).

    The constructor receives ``rollout.multi_turn.loop_args`` as keyword arguments.
    """

    def __init__(self, **loop_args: Any) -> None:
        self.loop_args = loop_args

    @abc.abstractmethod
    async def run(
        self, prompt_ids: tuple[int, ...], row: Mapping[str, Any], ctx: AgentContext, *, seed: int
    ) -> Trajectory | list[Trajectory]:
        """The trajectory that starts with ``prompt_ids``, or its segments in order.

        ``row`` holds the prompt's non-tensor columns (``raw_prompt``, dataset
        columns); ``seed`` is this trajectory's sampling seed (pass ``seed + turn``
        to :meth:`AgentContext.model_turn`). A list is a step-wise trajectory: each
        segment becomes a training row, all sharing the trajectory's reward and
        advantage (the first starts with ``prompt_ids``; later ones from
        :meth:`Trajectory.follow`).
        """


class ToolLoop(AgentLoop):
    """generate → tool calls → tools (concurrently) → their outputs → generate, until done."""

    def __init__(self) -> None:
        """No ``loop_args``: the config check refuses them rather than ignore them (a subclass
        that takes some declares them in its own ``__init__``)."""
        super().__init__()

    async def run(
        self, prompt_ids: tuple[int, ...], row: Mapping[str, Any], ctx: AgentContext, *, seed: int
    ) -> Trajectory | list[Trajectory]:
        """Turns until the model answers without a call, ``max_turns`` or the budget.

        A new segment starts at a turn boundary where the conversation renders
        differently from the tokens so far (:meth:`AgentContext.next_segment`).
        """
        segments = [ctx.new_trajectory(prompt_ids, row)]
        for turn in range(ctx.config.max_turns):
            trajectory = segments[-1]
            made = await ctx.model_turn(trajectory, seed=seed + turn)
            if made is None:
                break
            segment, parsed = made
            if not parsed.wants_tools:
                trajectory.finish = segment.finish_reason or "stop"
                break
            if turn == ctx.config.max_turns - 1:
                trajectory.finish = "max_turns"
                break
            outputs = await ctx.run_tools(parsed)
            if not ctx.add_tool_turn(trajectory, outputs):
                break
            following = ctx.next_segment(trajectory)
            if following is None:
                break
            if following is not trajectory:
                segments.append(following)
        return segments if len(segments) > 1 else segments[0]


def load_agent_loop(spec: str) -> type[AgentLoop]:
    """The agent loop class named by ``spec``: a registered name (``hfsdk list agent-loops``),
    ``module:Class`` or ``path/to/file.py:Class``; one line when it is none of them."""
    from hfsdk import ConfigError, get_registry
    from hfsdk_agents.tools import _load_callable

    if ":" not in spec:
        return get_registry("agent_loops")[spec].impl  # type: ignore[no-any-return]
    cls = _load_callable(spec, "rollout.multi_turn.agent_loop")
    if not (isinstance(cls, type) and issubclass(cls, AgentLoop)):
        raise ConfigError(
            f"rollout.multi_turn.agent_loop {spec!r} is a {type(cls).__name__}, not a subclass of "
            "hfsdk_agents.AgentLoop; point it at the loop class"
        )
    return cls
