"""Hook implementations that ship with the core (always registered).

Entries that belong to no single algorithm or backend live here.
"""

from __future__ import annotations

import hfsdk
from hfsdk.hookspecs import Register  # noqa: F401  (used by the hook implementations below)
