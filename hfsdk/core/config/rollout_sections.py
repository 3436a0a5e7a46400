"""Sub-sections plugins contribute to the ``rollout`` config (``rollout.<name>.*``).

A plugin registers a config class with ``hfsdk_register_rollout_sections``
(``register("multi_turn", MultiTurnConfig)``). The run config composer takes
``rollout.<name>`` out of the rollout data, structures it with that class (errors
name ``rollout.<name>.<key>``) and keeps it in the rollout section's
:attr:`~hfsdk.RolloutConfig.subsections`; ``config show`` and a run's
``config.yaml`` print it back under ``rollout.<name>``. Code reads it by class:
``rollout_config.section(MultiTurnConfig)`` (typed; the class's defaults when absent).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class RolloutSection(Protocol):
    """A contributed rollout sub-section that may own the width of the responses."""

    def response_budget(self) -> tuple[int, str] | None:
        """``(tokens, dotted key)`` a response may hold after its prompt when this section
        decides it (multi-turn: the whole trajectory's budget), else ``None`` (the
        backend's ``rollout.max_response_length``)."""
        ...


def response_budget(sections: Mapping[str, Any]) -> tuple[int, str] | None:
    """The first sub-section's response budget (see :class:`RolloutSection`), else ``None``."""
    for section in sections.values():
        if isinstance(section, RolloutSection):
            budget = section.response_budget()
            if budget is not None:
                return budget
    return None


def raw_response_budget(
    rollout: Any, classes: Mapping[str, type], structure_one: Any
) -> tuple[int, str] | None:
    """:func:`response_budget` of plain rollout data (before the config is composed).

    ``structure_one(data, cls)`` builds a sub-section; a sub-section that does not
    build yet counts as none (its own error is reported when the config is composed).
    """
    if not isinstance(rollout, Mapping):
        return None
    built = {}
    for name, cls in classes.items():
        data = rollout.get(name)
        if not isinstance(data, dict):
            continue
        try:
            built[name] = structure_one(data, cls)
        except Exception:
            continue
    return response_budget(built)


FEATURE_DISTRIBUTIONS = {
    "rollout.multi_turn": "hfsdk-plugin-agents",
    "rollout_correction": "hfsdk-plugin-rollout-corrections",
    "algorithm.is_correction": "hfsdk-plugin-rollout-corrections",
    "trainer.max_mismatch_kl": "hfsdk-plugin-rollout-corrections",
    "wandb": "hfsdk-plugin-tracking",
}
"""Config keys the default plugins contribute or alone read -> the distribution: a config
that sets one without that plugin gets a line saying what to install, not an unknown key
(or a setting nothing reads)."""

READ_BY_SECTION_PLUGIN = {
    "rollout_correction": ("algorithm.is_correction", "trainer.max_mismatch_kl")
}
"""Core keys only the plugin that registers a section reads (the older correction key; the
gate on the mismatch metrics that plugin reports) -> that section."""


def unread_key_line(config: Any, sections: Collection[str]) -> str | None:
    """The line for a key of :data:`READ_BY_SECTION_PLUGIN` set (not ``None``/``"none"``)
    while its section, so its plugin, is not registered; else ``None``."""
    for section, keys in READ_BY_SECTION_PLUGIN.items():
        for key in keys if section not in sections else ():
            top, name = key.split(".")
            if getattr(config.sections.get(top), name, None) not in (None, "none"):
                return missing_plugin_line(key)
    return None


def missing_plugin_line(key: str) -> str | None:
    """The line for a contributed ``key`` whose plugin is not loaded, else ``None``."""
    distribution = FEATURE_DISTRIBUTIONS.get(key)
    if distribution is None:
        return None
    return (
        f"config key {key!r} belongs to the {distribution} plugin, which is not installed "
        f"or is disabled (HFSDK_DISABLE_PLUGINS / HFSDK_LOAD_PLUGINS); "
        f"pip install {distribution}, or remove {key}"
    )
