"""Base config classes that backends extend.

Each role section of a run config (``actor``, ``critic``, ...) names its
training backend in ``backend``; the ``rollout`` section names its rollout
backend. The composer uses that name to pick the backend's config class; a
section that names none gets the backend an installed plugin declared the
default (``default_for=`` / ``default=True`` at registration).
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from hfsdk.core.config.help import SUBSECTIONS_KEY, help_field
from hfsdk.core.config.rollout_sections import response_budget

_Section = TypeVar("_Section")


@attrs.frozen(kw_only=True)
class RoleConfig:
    """A model role's section: which training backend builds it (the rest is the backend's)."""

    backend: str | None = help_field(
        "Training backend of this role (hfsdk list training-backends); null: the one an "
        "installed plugin declares default for the role's kind.",
        default=None,
    )

    def updates_in_one_pass(self, samples: int) -> bool:
        """Whether an update on ``samples`` samples is one optimizer step of one epoch, so the
        old log-probs need no pass of their own. The one place that decides it (asked by the
        algorithm before the step, by the backend before the update); ``False`` here."""
        return False


@attrs.frozen(kw_only=True)
class RolloutConfig:
    """The rollout section: which rollout backend generates (the rest is the backend's)."""

    backend: str | None = help_field(
        "Rollout backend (hfsdk list rollout-backends); null: the one an installed plugin "
        "declares default.",
        default=None,
    )
    subsections: dict[str, Any] = help_field(
        "Sub-sections installed plugins contribute (rollout.NAME.*, hfsdk list "
        "rollout-sections); filled by the config composer, not a key of its own.",
        factory=dict,
        converter=dict,
        metadata={SUBSECTIONS_KEY: True},
    )

    def section(self, cls: type[_Section]) -> _Section:
        """The contributed sub-section of class ``cls`` (its defaults when the config has none:
        the plugin is not installed, or the config was built by hand)."""
        for value in self.subsections.values():
            if type(value) is cls:
                return value
        return cls()

    def response_budget(self) -> tuple[int, str]:
        """``(tokens, dotted key)`` of a response's width: a sub-section's budget when one owns
        it (multi-turn rollouts), else the backend's ``max_response_length`` (every rollout
        section has it)."""
        owned = response_budget(self.subsections)
        if owned is not None:
            return owned
        return int(self.max_response_length), "rollout.max_response_length"  # type: ignore[attr-defined]

    def response_width(self) -> int:
        """The width of a batch's responses (:meth:`response_budget`)."""
        return self.response_budget()[0]
