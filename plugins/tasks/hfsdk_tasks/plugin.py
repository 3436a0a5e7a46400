"""Hook implementations of the built-in tasks plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_tasks(register: Register) -> None:
    """Register ``default`` (single-digit addition, docs/default_task.md)."""
    from hfsdk import DEFAULT_TASK
    from hfsdk_tasks.builtin import ADDITION_TASK

    register(DEFAULT_TASK, ADDITION_TASK)


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register the default task's reward (``default_task``) and cost (``default_task_cost``)."""
    from hfsdk_tasks import task

    register(task.REWARD_FUNCTION_NAME, task.default_task_reward)
    register(task.COST_FUNCTION_NAME, task.default_task_cost)
