"""Whether a run needs the behaviour policy's log-probs: one question, asked of the plugins."""

from __future__ import annotations

from typing import Any


def behaviour_log_probs_needed(config: Any) -> bool:
    """True when a plugin's ``hfsdk_behaviour_log_probs_needed`` says the run reads the
    log-probs the rollout sampled with (a rollout correction, the mismatch gate)."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    return bool(get_plugin_manager().hook.hfsdk_behaviour_log_probs_needed(config=config))
