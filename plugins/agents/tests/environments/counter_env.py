"""Environments for the loop tests: a counter (state per instance) and one whose tool raises."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hfsdk_agents.environments import Environment
from hfsdk_agents.environments.loop import EnvironmentLoop

CLOSED: list[str] = []
"""Names of the instances closed so far (the tests read it)."""


class Counter(Environment):
    """Counts up; done at ``row['target']``; reward 1 when it got there."""

    tools: ClassVar[tuple[str, ...]] = ("bump",)

    def reset(self, row: Mapping[str, Any]) -> str:
        self.count = 0
        self.target = int(row.get("target", 2))
        return f"count {self.count}"

    def bump(self, by: int) -> str:
        """Add to the counter.

        Args:
            by: How much to add.
        """
        self.count += by
        self.done = self.count >= self.target
        return f"count {self.count}"

    def reward(self) -> float:
        return 1.0 if self.count == self.target else 0.0

    def close(self) -> None:
        CLOSED.append(f"counter:{self.count}")


class Broken(Environment):
    """A tool that raises on every call; the reward counts the calls that reached it."""

    tools: ClassVar[tuple[str, ...]] = ("bump",)

    def reset(self, row: Mapping[str, Any]) -> str:
        self.calls = 0
        return "count 0"

    def bump(self, by: int) -> str:
        """Always fails.

        Args:
            by: Ignored.
        """
        self.calls += 1
        raise ValueError(f"bump {by} is broken")

    def reward(self) -> float:
        return float(self.calls)


class Adder(Environment):
    """The tool_use task's ``add`` as an environment; the reward is the number of adds."""

    tools: ClassVar[tuple[str, ...]] = ("add",)

    def reset(self, row: Mapping[str, Any]) -> str:
        self.adds = 0
        return ""

    def add(self, a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        self.adds += 1
        return int(a) + int(b)

    def reward(self) -> float:
        return float(self.adds)


class AdderObserved(Adder):
    """The adder whose reset returns an observation (a user turn before the first model turn)."""

    def reset(self, row: Mapping[str, Any]) -> str:
        super().reset(row)
        return "You may add numbers."


class Unscored(Counter):
    """A counter whose reward is not a number a run can train on."""

    def reward(self) -> float:
        return float("nan")


class Miscored(Counter):
    """A counter whose reward is text (a row's ``score`` column says which)."""

    def reset(self, row: dict) -> str:
        self.score = row["score"]
        return super().reset(row)

    def reward(self) -> float:
        return self.score


class Unclosable(Counter):
    """A counter whose close() fails."""

    def close(self) -> None:
        raise RuntimeError("close failed")


class Unbuildable(Counter):
    """A counter whose constructor fails (a simulator that cannot start)."""

    def __init__(self) -> None:
        raise RuntimeError("no simulator")


class OwnEnvironmentLoop(EnvironmentLoop):
    """A custom loop built on the environment loop (it runs the environments too)."""


class Marker(Environment):
    """Keeps the row's ``cells`` list as its state and appends to it: a row shared between
    trajectories would carry one's marks into the next (the reward is the list's length)."""

    tools: ClassVar[tuple[str, ...]] = ("bump",)

    def reset(self, row: Mapping[str, Any]) -> str:
        self.cells = row["cells"]
        return f"count {len(self.cells)}"

    def bump(self, by: int) -> str:
        """Mark a cell.

        Args:
            by: The cell.
        """
        self.cells.append(by)
        self.done = True
        return f"count {len(self.cells)}"

    def reward(self) -> float:
        return float(len(self.cells))


class Undecided(Counter):
    """A counter whose ``done`` is a bound method put on the instance (always truthy)."""

    def reset(self, row: Mapping[str, Any]) -> str:
        self.done = self.reached  # type: ignore[assignment]
        return super().reset(row)

    def bump(self, by: int) -> str:
        """Add to the counter.

        Args:
            by: How much to add.
        """
        self.count += by
        return f"count {self.count}"

    def reached(self) -> bool:
        return self.count >= self.target
