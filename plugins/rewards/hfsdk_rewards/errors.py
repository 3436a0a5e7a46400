"""The error a misbehaving reward function raises."""

from __future__ import annotations

from hfsdk import HfsdkError


class RewardFunctionError(HfsdkError):
    """A reward function raised, or returned something other than one finite score per sample."""
