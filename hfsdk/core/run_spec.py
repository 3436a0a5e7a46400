"""The spec of one run: its algorithm's registered spec, configured by the run's config."""

from __future__ import annotations

from typing import Any

from hfsdk.core.algorithm_spec import AlgorithmSpec
from hfsdk.core.plugin_manager import get_registry


def run_spec(config: Any) -> AlgorithmSpec:
    """The spec of the run ``config`` describes: its algorithm's registered spec, configured
    by the run's ``algorithm`` section (:meth:`AlgorithmSpec.for_run`)."""
    spec: AlgorithmSpec = get_registry("algorithms")[config.algo].impl
    return spec.for_run(config.sections.get("algorithm"))
