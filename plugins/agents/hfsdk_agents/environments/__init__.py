"""Environments: one stateful object per trajectory (docs/agents.md, "Environments").

:class:`Environment` is the protocol (``tools``, ``reset(row)``, ``reward()``,
``close()``, ``done``); plugins register environments with
``hfsdk_register_environments``; ``environment_loop`` drives them. Built in:
``frozen_lake`` (gymnasium's FrozenLake) and the reasoning-gym data source and
reward (:mod:`.reasoning_gym_data`, :mod:`.reasoning_gym_reward`).
"""

from __future__ import annotations

from hfsdk_agents.environments.protocol import Environment, EnvironmentSpec, environment_spec

__all__ = ["Environment", "EnvironmentSpec", "environment_spec"]
