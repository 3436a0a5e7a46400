"""``environment_loop``: the tool loop driven by one environment instance per trajectory.

Each trajectory gets a fresh instance of its row's environment
(``rollout.multi_turn.environment``, or the row's
``rollout.multi_turn.environment_column``). ``reset(row)``'s observation is the
first context turn, never trained on: a user message after the prompt's (with a chat
template, the prompt is rendered again with it, as a fresh request would be); then: generate
→ parse tool calls → call them on this instance, in the order written (the state
makes order matter) → append their outputs → generate, until the environment is
``done`` (the calls written after the one that set it are answered with an error, not
run), the model answers without a call, ``max_turns`` or the budget. Only that
environment's tools can be called: another name gets the unknown-tool error listing
the environment's own. The environment's :meth:`reward` lands in the trajectory's
``extra`` (``environment_reward``), which the ``environment`` reward function reads.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk import ConfigError, HfsdkError
from hfsdk_agents.config import MultiTurnConfig
from hfsdk_agents.environments.calls import bound_tools, call_environment_tool
from hfsdk_agents.environments.registry import load_environment
from hfsdk_agents.loops import AgentContext, AgentLoop
from hfsdk_agents.parsers import ToolCall
from hfsdk_agents.tools import Tool, ToolOutput
from hfsdk_agents.trajectory import Trajectory, shared_prefix

REWARD_KEY = "environment_reward"
"""Where the loop puts the environment's reward in ``Trajectory.extra``."""


def environment_name(row: Mapping[str, Any], config: MultiTurnConfig) -> str:
    """The environment ``row`` runs in: the fixed one, or the row's column (else one line)."""
    if config.environment is not None:
        return config.environment
    column = config.environment_column
    if column is None:
        raise ConfigError(
            "rollout.multi_turn.agent_loop=environment_loop needs an environment: set "
            "rollout.multi_turn.environment=NAME or environment_column=COLUMN"
        )
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        where = f"row {row['uid']}" if "uid" in row else "a row"
        raise HfsdkError(
            f"{where} has no environment name in column {column!r} (got {value!r}); every row "
            "needs one (rollout.multi_turn.environment_column), or set "
            "rollout.multi_turn.environment for all rows"
        )
    return value


EPISODE_ENDED = "episode_ended"
"""``ToolOutput.error`` of a call written after the call that set the environment's ``done``."""


def is_done(env: Any, name: str) -> bool:
    """The environment's ``done`` (false where it has none or it is ``None``).

    Taken: a bool, ``0`` / ``1``, and a 0-dim array or tensor (a numpy bool, ``tensor(True)``)
    whose ``.item()`` is one of those. Anything else is refused, not tested for truth:
    ``getattr(env, "done")`` on a method is always truthy, so every episode would end after
    its first tool call.
    """
    value = getattr(env, "done", False)
    if value is None:
        return False
    if not isinstance(value, (bool, int)) and getattr(value, "shape", None) == ():
        item = getattr(value, "item", None)
        value = item() if callable(item) else value
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise HfsdkError(
        f"environment {name!r}: done is a {type(value).__name__} ({value!r:.80}); expected "
        "True or False (or None, 0 / 1, a 0-dim array or tensor of one): make done an "
        "attribute (self.done = True) or a @property returning a bool"
    )


async def _run_calls(
    items: Sequence[ToolCall | str],
    tools: Mapping[str, Tool],
    env: Any,
    config: MultiTurnConfig,
    name: str,
) -> list[ToolOutput]:
    """The outputs of one turn's calls, run one at a time in the order written.

    The n-th output answers the n-th item (the call formats have no ids). ``done`` ends the
    episode after the call that set it, so the calls after it do not run: they are answered
    with an error output, as malformed calls are, and the state the reward reads stays as
    that call left it.
    """
    outputs: list[ToolOutput] = []
    for item in items:
        if is_done(env, name):
            outputs.append(
                ToolOutput(
                    name=item.name if isinstance(item, ToolCall) else "",
                    content="Error: the episode has ended; this call did not run",
                    ok=False,
                    error=EPISODE_ENDED,
                )
            )
        elif isinstance(item, ToolCall):
            outputs.append(
                await call_environment_tool(
                    tools,
                    item.name,
                    item.arguments,
                    timeout_s=config.tool_timeout_s,
                    max_output_chars=config.max_tool_output_chars,
                )
            )
        else:
            outputs.append(
                ToolOutput(name="", content=f"Error: {item}", ok=False, error="malformed_call")
            )
    return outputs


def _observed(trajectory: Trajectory, observation: str, ctx: AgentContext) -> Trajectory | None:
    """``trajectory`` with the reset observation as a user turn after the prompt; ``None``
    (finish ``budget``) when it does not fit.

    Where the conversation is kept as messages, the prompt is rendered again with the
    observation as its last user message, as a fresh request would see it: appending a
    user turn after the prompt's open assistant header would put an empty assistant turn
    in the tokens that the messages lack, so the first turn boundary would always split
    the trajectory. The row's prompt and that rendering share a prefix; the rest is
    context the budget counts (``carried``), as in a later segment.
    """
    messages = trajectory.messages
    rendered = None
    if messages is not None:
        messages = [*messages, {"role": "user", "content": observation}]
        rendered = ctx.renderer.render_conversation(messages)
    if rendered is None:  # no messages kept (plain rendering, images): append after the prompt
        return trajectory if ctx.add_user_turn(trajectory, observation) else None
    prompt = tuple(rendered)
    observed = Trajectory(
        prompt_ids=prompt,
        row_prompt=trajectory.prompt_ids,
        carried=len(prompt) - shared_prefix(prompt, trajectory.prompt_ids),
        messages=messages,
        images=list(trajectory.images),
    )
    if ctx.remaining(observed) <= 0:
        trajectory.finish = "budget"
        return None
    return observed


class EnvironmentLoop(AgentLoop):
    """One environment instance per trajectory; its tools, its end, its reward."""

    async def run(
        self, prompt_ids: tuple[int, ...], row: Mapping[str, Any], ctx: AgentContext, *, seed: int
    ) -> Trajectory | list[Trajectory]:
        """The episode of ``row``'s environment (see the module docstring), as segments
        where the conversation stops rendering as the token stream (as the tool loop)."""
        name = environment_name(row, ctx.config)
        spec = load_environment(name)
        segments = [ctx.new_trajectory(prompt_ids, row)]
        try:
            env = spec.create()
        except Exception as err:
            raise HfsdkError(
                f"environment {name!r}: creating it raised {type(err).__name__}: {err}"
            ) from err
        try:
            try:
                observation = env.reset(row)
            except Exception as err:
                raise HfsdkError(
                    f"environment {name!r}: reset(row) raised {type(err).__name__}: {err}"
                ) from err
            first = _observed(segments[0], str(observation), ctx) if observation else segments[0]
            if first is not None:
                segments[0] = first
                await self._turns(segments, env, spec.schemas, ctx, seed, name=name)
            made = self._end(segments, env, name)
        except BaseException:
            with contextlib.suppress(Exception):  # the first error is the one to report
                env.close()
            raise
        try:
            env.close()
        except Exception as err:
            raise HfsdkError(
                f"environment {name!r}: close() raised {type(err).__name__}: {err}"
            ) from err
        return made

    @staticmethod
    async def _turns(
        segments: list[Trajectory],
        env: Any,
        schemas: Mapping[str, Mapping[str, Any]],
        ctx: AgentContext,
        seed: int,
        *,
        name: str = "",
    ) -> None:
        name = name or type(env).__qualname__
        tools = bound_tools(schemas, env)
        config = ctx.config
        for turn in range(config.max_turns):
            trajectory = segments[-1]
            made = await ctx.model_turn(trajectory, seed=seed + turn)
            if made is None:
                return
            segment, parsed = made
            if not parsed.wants_tools:
                trajectory.finish = segment.finish_reason or "stop"
                return
            # Unlike the tool loop, the last turn's calls run too: they move the state the
            # reward is read from.
            outputs = await _run_calls(parsed.items, tools, env, config, name)
            if not ctx.add_tool_turn(trajectory, outputs):
                return
            if is_done(env, name):
                trajectory.finish = "done"
                return
            if turn < config.max_turns - 1:
                following = ctx.next_segment(trajectory)
                if following is None:
                    return
                if following is not trajectory:
                    segments.append(following)
        segments[-1].finish = "max_turns"

    @staticmethod
    def _end(segments: list[Trajectory], env: Any, name: str) -> Trajectory | list[Trajectory]:
        try:
            value = env.reward()
        except Exception as err:
            raise HfsdkError(
                f"environment {name!r}: reward() raised {type(err).__name__}: {err}"
            ) from err
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            # float() would take "1.0" and True as rewards, and call None a TypeError raised.
            raise HfsdkError(
                f"environment {name!r}: reward() returned {value!r} "
                f"({type(value).__name__}); return a number (e.g. 0.0 for an episode that failed)"
            )
        reward = float(value)
        if not math.isfinite(reward):
            raise HfsdkError(
                f"environment {name!r}: reward() returned {reward}; return a finite number "
                "(e.g. 0.0 for an episode that failed)"
            )
        for trajectory in segments:
            trajectory.extra["environment"] = name
        segments[-1].extra[REWARD_KEY] = reward  # the last segment is the one scored
        return segments if len(segments) > 1 else segments[0]
