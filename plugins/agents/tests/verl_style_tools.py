"""A tool class written the way verl's BaseTool subclasses are (no verl import)."""

from __future__ import annotations

from typing import Any


class CalcTool:
    """Adds two numbers per call; counts its instances' lifecycle calls."""

    events: list[str] = []  # noqa: RUF012 - shared on purpose: the test reads it

    def __init__(self, config: dict, tool_schema: Any) -> None:
        self.offset = int(config.get("offset", 0))
        self.schema = tool_schema

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> str:
        self.events.append("create")
        return instance_id or "x"

    async def execute(self, instance_id: str, parameters: dict, **kwargs: Any) -> tuple:
        self.events.append("execute")
        return str(parameters["a"] + parameters["b"] + self.offset), 0.0, {}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self.events.append("release")
