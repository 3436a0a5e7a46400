"""FrozenLake from ``gymnasium`` as an environment: a ``move(direction)`` tool.

The dynamics are gymnasium's own ``FrozenLake-v1`` on a fixed small map with
``is_slippery=False`` (deterministic moves; walking into the edge stays put). The
observation is the board as text, one word per row, the agent's cell shown as
``P``, then the episode's status (``ok``, ``hole``, ``goal``)::

    PFH
    FFF
    HFG
    ok

The reward is gymnasium's: 1.0 once the agent stands on ``G``, else 0.0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from hfsdk_agents.tool_worker import ToolError

LAKE_MAP: tuple[str, ...] = ("SFH", "FFF", "HFG")
"""The fixed map: ``S`` start, ``F`` frozen, ``H`` hole, ``G`` goal."""

ACTIONS: Mapping[str, int] = {"left": 0, "down": 1, "right": 2, "up": 3}
"""gymnasium's FrozenLake action numbers."""

AGENT = "P"
STATUS = ("ok", "hole", "goal")


def render_board(desc: tuple[str, ...], state: int, status: str) -> str:
    """The board with the agent at ``state`` (row-major cell index), then ``status``."""
    ncol = len(desc[0])
    row, col = divmod(state, ncol)
    rows = [
        line if r != row else line[:col] + AGENT + line[col + 1 :] for r, line in enumerate(desc)
    ]
    return "\n".join([*rows, status])


class FrozenLake:
    """gymnasium's FrozenLake (fixed map, not slippery); the model walks with ``move``."""

    tools: ClassVar[tuple[str, ...]] = ("move",)
    lake_map: ClassVar[tuple[str, ...]] = LAKE_MAP

    def __init__(self) -> None:
        from hfsdk_agents.environments.extras import require

        gymnasium = require("gymnasium")
        self.env: Any = gymnasium.make("FrozenLake-v1", desc=list(self.lake_map), is_slippery=False)
        self.state = 0
        self.total_reward = 0.0
        self.done = False
        self.moves = 0

    def reset(self, row: Mapping[str, Any]) -> str:
        """Start at ``S``; the board as the first observation."""
        self.state, _ = self.env.reset(seed=0)
        self.total_reward, self.done, self.moves = 0.0, False, 0
        return render_board(self.lake_map, int(self.state), "ok")

    def move(self, direction: Literal["left", "down", "right", "up"]) -> str:
        """Move one cell on the frozen lake.

        Args:
            direction: Where to step: left, down, right or up.
        """
        if self.done:
            raise ToolError("the episode has ended; no more moves")
        self.state, reward, terminated, truncated, _ = self.env.step(ACTIONS[direction])
        self.moves += 1
        self.total_reward += float(reward)
        self.done = bool(terminated or truncated)
        status = "goal" if reward > 0 else ("hole" if terminated else "ok")
        return render_board(self.lake_map, int(self.state), status)

    def reward(self) -> float:
        """gymnasium's episode return: 1.0 when the goal was reached."""
        return self.total_reward

    def close(self) -> None:
        """Close the gymnasium environment."""
        self.env.close()
