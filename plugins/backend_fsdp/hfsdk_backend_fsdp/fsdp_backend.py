"""The ``fsdp`` training backend: the worker class and the engine of each role kind.

The algorithm declares each role's kind (``policy``, ``frozen_policy``,
``value``, ``scorer``); the backend never guesses it from the role's name.
Engine kinds: ``actor`` (policy), ``reference`` (frozen policy), ``critic``
(value) and ``score`` (scorer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from hfsdk import HfsdkError, Worker
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

    from hfsdk_backend_fsdp.engine import FSDPEngine

ENGINE_KINDS = ("actor", "reference", "critic", "score")


ENGINE_OF_ROLE_KIND = {
    "policy": "actor",
    "frozen_policy": "reference",
    "value": "critic",
    "scorer": "score",
}
"""Which engine serves each declared role kind."""


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

    @staticmethod
    def engine_class(kind: str) -> type[FSDPEngine]:
        """The engine class of ``kind`` (``actor``, ``reference``, ``critic``, ``score``)."""
        from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
        from hfsdk_backend_fsdp.critic import CriticEngine
        from hfsdk_backend_fsdp.scorer import ScoreEngine

        classes: dict[str, type[FSDPEngine]] = {
            "actor": ActorEngine,
            "reference": ReferenceEngine,
            "critic": CriticEngine,
            "score": ScoreEngine,
        }
        if kind not in classes:
            raise HfsdkError(f"engine kind {kind!r} is unknown; expected one of {ENGINE_KINDS}")
        return classes[kind]

    @classmethod
    def create_engine(
        cls,
        role: str,
        config: FSDPRoleConfig | None = None,
        *,
        kind: str,
        process_group: ProcessGroup | None = None,
        total_steps: int | None = None,
    ) -> FSDPEngine:
        """Build the engine of ``role`` in this process (FSDP2 over ``process_group``).

        ``kind`` is an engine kind (``actor``, ``reference``, ``critic``, ``score``;
        see :data:`ENGINE_OF_ROLE_KIND`); ``config`` defaults to
        ``FSDPRoleConfig()`` (the default task's model).
        """
        config = config or FSDPRoleConfig()
        if not isinstance(config, FSDPRoleConfig):
            raise HfsdkError(
                f"the fsdp backend needs an FSDPRoleConfig for role {role!r}, got "
                f"{type(config).__name__}; set '{role}.backend: fsdp'"
            )
        engine_cls = cls.engine_class(kind)
        return engine_cls(config, role=role, process_group=process_group, total_steps=total_steps)
