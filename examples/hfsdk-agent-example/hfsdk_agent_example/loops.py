"""The example's agent loop: the built-in tool loop plus a per-trajectory trace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hfsdk_agents


class TracedToolLoop(hfsdk_agents.AgentLoop):
    """generate → tools → generate like ``tool_loop``, recording each call's answer in ``extra``."""

    async def run(
        self,
        prompt_ids: tuple[int, ...],
        row: Mapping[str, Any],
        ctx: hfsdk_agents.AgentContext,
        *,
        seed: int,
    ) -> hfsdk_agents.Trajectory:
        """One trajectory; ``extra`` gets ``traced_calls`` and ``tool_answers``."""
        trajectory = hfsdk_agents.Trajectory(prompt_ids=tuple(prompt_ids))
        answers: list[str] = []
        for turn in range(ctx.config.max_turns):
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
                break  # the outputs did not fit the token budget: the model never read them
            answers.extend(o.content for o in outputs)
        trajectory.extra.update(traced_calls=len(answers), tool_answers=answers)
        return trajectory
