"""The ``fsdp`` training backend: the worker class and the engine of each role kind.

The algorithm declares each role's kind (``policy``, ``frozen_policy``,
``value``, ``scorer``); the backend never guesses it from the role's name.
Engine kinds: ``actor`` (policy), ``reference`` (frozen policy), ``critic``
(value) and ``score`` (scorer).
"""

from __future__ import annotations

from typing import ClassVar

from hfsdk import HfsdkError, Worker
from hfsdk_backend_fsdp import engine_factory
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig


class FSDPBackend:
    """FSDP2 training backend for HF transformers models: every role kind, on CPU or GPU."""

    config_cls: ClassVar[type[FSDPRoleConfig]] = FSDPRoleConfig

    @staticmethod
    def worker_class(role_kind: str) -> type[Worker]:
        """The worker class that runs a role of ``role_kind`` (what the trainer starts)."""
        from hfsdk_backend_fsdp.fsdp_worker import WORKER_CLASSES

        if role_kind not in WORKER_CLASSES:
            raise HfsdkError(
                f"the fsdp backend serves role kinds {sorted(WORKER_CLASSES)}, not {role_kind!r}"
            )
        return WORKER_CLASSES[role_kind]

    engine_class = staticmethod(engine_factory.engine_class)
    create_engine = staticmethod(engine_factory.create_engine)
