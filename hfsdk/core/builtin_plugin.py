"""Hook implementations that ship with the core (always registered).

Entries that belong to no single algorithm or backend live here.
"""

from __future__ import annotations

import hfsdk
from hfsdk.hookspecs import Register


@hfsdk.hookimpl
def hfsdk_register_transfer_protocols(register: Register) -> None:
    """Register the built-in transfer protocols (``one_to_all`` ... ``mesh_proto``)."""
    from hfsdk.core.workers.protocols.builtins import BUILTIN_PROTOCOLS

    for name, protocol in BUILTIN_PROTOCOLS.items():
        register(name, protocol, doc=protocol.doc)


@hfsdk.hookimpl
def hfsdk_register_config_sections(register: Register) -> None:
    """Register the core's sections ``trainer``, ``data`` and ``placement``."""
    from hfsdk.core.data.data_config import DataConfig
    from hfsdk.core.trainer.placement_config import PlacementConfig
    from hfsdk.core.trainer.trainer_config import TrainerConfig

    register("trainer", TrainerConfig)
    register("data", DataConfig)
    register("placement", PlacementConfig)
