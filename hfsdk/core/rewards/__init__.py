"""Reward functions: the calling convention, built-ins, loading and weighted composition.

A reward function is called once per batch on the controller::

    fn(prompts: list[str], responses: list[str], **columns) -> list[float] | list[dict]

``columns`` are the batch's dataset columns (one value per sample each), plus
the function's settings (see :func:`compute_rewards`). It returns one float
per sample, or one dict per sample with a ``score`` key whose other numeric
values are logged as metrics. ``async def`` functions are awaited (several
async functions run concurrently).

The entry point is :func:`compute_rewards`; see ``docs/rewards.md``.
"""

from hfsdk.core.rewards.composition import compute_rewards, load_reward_functions
from hfsdk.core.rewards.errors import RewardFunctionError

__all__ = ["RewardFunctionError", "compute_rewards", "load_reward_functions"]
