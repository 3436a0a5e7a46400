"""``placement: auto``: the planner splits a run's configured devices among its roles."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def resolve_placement(config: Any) -> dict[str, Any]:
    """The placement section the planner chooses for ``config`` (``placement.mode=auto``).

    ``{"pools": {name: {"devices": n}}, "roles": {role: pool}, "rollout_tp": {role: tp}}``:
    the devices of ``config.placement.pools`` summed, priced on ``placement.cluster``.
    Synchronous runs colocate or split the algorithm's roles; overlapped pipelines
    also size a rollout pool (or none).
    """
    from hfsdk_planner.auto import auto_placement_section
    from hfsdk_planner.cluster_lookup import resolve_cluster
    from hfsdk_planner.run_plan import (
        plan_rollout_split,
        priced_threads,
        run_setup,
        setup_role_sizes,
    )

    placement = config.placement
    devices = sum(pool.devices for pool in placement.pools.values())
    cluster = resolve_cluster(placement.cluster)
    if config.trainer.pipeline != "sync":
        section, _plan = plan_rollout_split(config, devices, cluster)
    else:
        # Price the run's own roles: a signal scored by functions costs no device,
        # and each model role has the size its model_path gives.
        setup = run_setup(config)
        section = auto_placement_section(
            config.algo,
            role_sizes=setup_role_sizes(setup),
            num_devices=devices,
            cluster=cluster,
            # Search with the run's batch, lengths and levers, not the defaults.
            workload=setup.workload,
            # The threads the run's workers will use, as the session decides them.
            threads=priced_threads(setup, cluster) if cluster.device_kind == "cpu" else None,
        )
    logger.warning("placement: auto chose %s", section)
    return section
