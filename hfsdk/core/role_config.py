"""Base config classes that backends extend.

Each role section of a run config (``actor``, ``critic``, ...) names its
training backend in ``backend``; the ``rollout`` section names its rollout
backend. The composer uses that name to pick the backend's config class.
"""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class RoleConfig:
    """A model role's section: which training backend builds it (the rest is the backend's)."""

    backend: str = "fsdp"


@attrs.frozen(kw_only=True)
class RolloutConfig:
    """The rollout section: which rollout backend generates (the rest is the backend's)."""

    backend: str = "hf"
