"""The ``gateway`` agent loop: an agent program drives the trajectory through HTTP.

For each trajectory the loop opens a :class:`~hfsdk_agents.gateway.session.Session`
on the process's :class:`~hfsdk_agents.gateway.server.GatewayServer`, calls the
configured agent with the session's base URL and the dataset row, and turns what
the session captured into the trajectory (one :class:`Trajectory`, or a list of
segments when the agent changed earlier turns). The reward the agent returned
(or posted to ``/s/<token>/reward``) is kept in ``extra["agent_reward"]`` for the
``agent_reward`` reward function; the final conversation in ``extra["messages"]``.

An agent that raises, passes its deadline, never calls the model or sends
malformed messages drops its trajectory: an empty, fully masked row with
``finish: dropped`` (counted by ``agent/dropped``) and one log line; once the
budget or ``max_turns`` ended a trajectory the model spoke in, such a failure keeps it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import numbers
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hfsdk_agents.gateway.agents import Agent, AgentOutcome, load_agent, run_agent
from hfsdk_agents.gateway.session import Session
from hfsdk_agents.loops import AgentContext, AgentLoop
from hfsdk_agents.trajectory import ChatTemplateRenderer, Trajectory

if TYPE_CHECKING:
    from hfsdk_agents.gateway.server import GatewayServer

logger = logging.getLogger(__name__)

DROPPED = "dropped"
"""``finish`` of a dropped trajectory."""
MODEL_NAME = "policy"
"""The model name ``/v1/models`` lists (any name is accepted in requests)."""


class GatewayLoop(AgentLoop):
    """Runs ``rollout.multi_turn.agent`` against an OpenAI-compatible endpoint per trajectory."""

    def __init__(self, **loop_args: Any) -> None:
        super().__init__(**loop_args)
        self._server: GatewayServer | None = None
        self._agents: dict[str, Agent] = {}
        self._lock = threading.Lock()

    @property
    def server(self) -> GatewayServer:
        """The loopback server (started on first use, kept for the loop's life)."""
        with self._lock:
            if self._server is None:
                from hfsdk_agents.gateway.server import GatewayServer

                self._server = GatewayServer()
            return self._server

    def agent(self, spec: str) -> Agent:
        """The agent ``spec`` names, loaded once."""
        if spec not in self._agents:
            self._agents[spec] = load_agent(spec)
        return self._agents[spec]

    def close(self) -> None:
        """Stop the server."""
        if self._server is not None:
            self._server.close()
            self._server = None

    async def run(
        self, prompt_ids: tuple[int, ...], row: Mapping[str, Any], ctx: AgentContext, *, seed: int
    ) -> Trajectory | list[Trajectory]:
        """The agent's trajectory (or its segments); a dropped one is an empty row."""
        spec = ctx.config.agent
        if spec is None:
            from hfsdk import ConfigError

            raise ConfigError(
                "rollout.multi_turn.agent_loop=gateway needs rollout.multi_turn.agent "
                "(a registered agent, module:fn or path/file.py:fn)"
            )
        agent = self.agent(spec)
        server = self.server
        session = Session(
            ctx=ctx,
            prompt_ids=prompt_ids,
            row=row,
            seed=seed,
            use_template=isinstance(ctx.renderer, ChatTemplateRenderer),
            model=MODEL_NAME,
            loop=asyncio.get_running_loop(),
        )
        base_url = server.open(session)
        try:
            outcome = await run_agent(agent, base_url, row, deadline_s=ctx.config.agent_deadline_s)
        finally:
            server.close_session(session)
        return finish(session, outcome, prompt_ids, row)


def _reward(value: Any) -> tuple[float | None, str | None]:
    if value is None:
        return None, None
    # numbers.Real takes NumPy and other numeric scalars (np.float32(0.5)); bool is no reward.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, f"returned {value!r}; an agent returns a finite number (its reward) or None"
    reward = float(value)
    if not math.isfinite(reward):
        return None, f"returned {value!r}; an agent returns a finite number (its reward) or None"
    return reward, None


def drop_reason(session: Session, outcome: AgentOutcome) -> str | None:
    """Why the trajectory is dropped, or ``None`` to keep it."""
    # Budget / max_turns ended a trajectory the model spoke in: a failure after that (an
    # error, a hang past the deadline) keeps what the agent made. Malformed messages sent
    # after the end are not recorded (Session.chat).
    ended = session.finish is not None and session.model_calls > 0
    if session.malformed is not None:
        return f"sent malformed messages: {session.malformed}"
    if outcome.error is not None and not ended:  # a timed-out agent's error names the deadline
        return outcome.error
    if not session.model_calls:
        return "never called the model"
    return _reward(outcome.value)[1]


def finish(
    session: Session, outcome: AgentOutcome, prompt_ids: tuple[int, ...], row: Mapping[str, Any]
) -> Trajectory | list[Trajectory]:
    """The trajectory (or segments) the session captured, or a dropped, empty one."""
    reason = drop_reason(session, outcome)
    if reason is not None:
        logger.warning(
            "gateway: dropped the trajectory of row %s: the agent %s", row.get("uid", "?"), reason
        )
        return Trajectory(
            prompt_ids=tuple(prompt_ids), finish=DROPPED, extra={"agent_dropped": reason}
        )
    reward, _ = _reward(outcome.value)
    if reward is None:
        reward = session.reward
    segments = session.trajectories()
    last = segments[-1]
    model_segments = [s for s in last.segments if s.trainable]
    last.finish = session.finish or (model_segments[-1].finish_reason or "stop")
    for segment in segments:
        segment.extra["messages"] = session.conversation
        if reward is not None:
            segment.extra["agent_reward"] = reward
    if len(segments) == 1 and segments[0].prompt_ids == tuple(prompt_ids):
        return segments[0]
    return segments
