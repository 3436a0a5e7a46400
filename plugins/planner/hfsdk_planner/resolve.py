"""``placement: auto``: the planner splits a run's configured devices among its roles."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def resolve_placement(config: Any) -> dict[str, Any]:
    """The placement section the planner chooses for ``config`` (``placement.mode=auto``).

    What ``hfsdk_resolve_placement`` answers the session: :func:`planned_placement`,
    logged once as the run's choice.
    """
    from hfsdk_planner.run_plan import planned_placement

    section = planned_placement(config)
    logger.warning("placement: auto chose %s", section)
    return section
