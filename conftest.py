"""Session-wide collection order for the whole repository's tests."""

from __future__ import annotations

import pytest

FIRST = ("plugins/rollout_vllm/tests/",)
"""Tests that run an in-process vLLM engine go first: the engine shares the process
with every test before it, and state other tests leave behind in the process (seen in
a full-suite run: greedy requests differing from HF's, then a generation that never
finished) must not reach it. Each group keeps its own order."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the :data:`FIRST` groups to the front, keeping every other order."""
    def leads(item: pytest.Item) -> bool:
        return any(group in item.path.as_posix() for group in FIRST)

    first = [item for item in items if leads(item)]
    rest = [item for item in items if not leads(item)]
    items[:] = first + rest
