"""The example's tool: an async calculator with latency, like a remote service."""

from __future__ import annotations

import asyncio


async def slow_add(a: int, b: int) -> int:
    """An async calculator that adds two integers after a short wait.

    Args:
        a: The first number.
        b: The second number.
    """
    await asyncio.sleep(0.005)
    return int(a) + int(b)
