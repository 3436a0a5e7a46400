"""Base config classes that backends extend.

Each role section of a run config (``actor``, ``critic``, ...) names its
training backend in ``backend``; the ``rollout`` section names its rollout
backend. The composer uses that name to pick the backend's config class; a
section that names none gets the backend an installed plugin declared the
default (``default_for=`` / ``default=True`` at registration).
"""

from __future__ import annotations

import attrs

from hfsdk.core.agents.config import MultiTurnConfig
from hfsdk.core.config.help import help_field


@attrs.frozen(kw_only=True)
class RoleConfig:
    """A model role's section: which training backend builds it (the rest is the backend's)."""

    backend: str | None = help_field(
        "Training backend of this role (hfsdk list training-backends); null: the one an "
        "installed plugin declares default for the role's kind.",
        default=None,
    )


@attrs.frozen(kw_only=True)
class RolloutConfig:
    """The rollout section: which rollout backend generates (the rest is the backend's)."""

    backend: str | None = help_field(
        "Rollout backend (hfsdk list rollout-backends); null: the one an installed plugin "
        "declares default.",
        default=None,
    )
    multi_turn: MultiTurnConfig = help_field(
        "Multi-turn rollouts with tools (docs/agents.md); off unless tools or agent_loop is set.",
        factory=MultiTurnConfig,
    )

    def response_width(self) -> int:
        """The width of a batch's responses: the multi-turn token budget for multi-turn
        rollouts, else the backend's ``max_response_length`` (every rollout section has it)."""
        if self.multi_turn.active:
            return self.multi_turn.max_response_tokens
        return int(self.max_response_length)  # type: ignore[attr-defined]
