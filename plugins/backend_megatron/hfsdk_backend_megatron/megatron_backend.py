"""megatron-core training backend.

Only the configuration is registered so far: ``hfsdk config show`` accepts a
megatron role section, and a run that selects it stops with a clear error
before any worker starts (the backend provides no worker class yet).
"""

from __future__ import annotations

from typing import Any


class MegatronBackend:
    """megatron-core TP/PP backend for a role (not implemented yet)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "the megatron backend is registered but cannot build models yet; "
            "use backend: fsdp for this role"
        )
