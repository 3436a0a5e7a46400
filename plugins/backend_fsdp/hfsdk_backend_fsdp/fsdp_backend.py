"""The ``fsdp`` training backend: picks and builds the engine of a role.

Role names map to engine kinds: ``actor``; ``reference``/``ref``; anything
ending in ``critic`` (``critic``, ``reward_critic``, ``cost_critic``); and
``reward``/``cost`` or anything ending in ``_model`` (a scoring model). Pass
``kind=`` to choose explicitly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

    from hfsdk_backend_fsdp.engine import FSDPEngine

ENGINE_KINDS = ("actor", "reference", "critic", "score")


def engine_kind(role: str) -> str:
    """The engine kind of a role name (see the module docstring)."""
    if role == "actor":
        return "actor"
    if role in ("reference", "ref"):
        return "reference"
    if role.endswith("critic"):
        return "critic"
    if role in ("reward", "cost") or role.endswith("_model"):
        return "score"
    raise HfsdkError(
        f"the fsdp backend does not know what role {role!r} is; name it actor, reference, "
        f"critic (or *_critic), reward, cost (or *_model), or pass kind= one of {ENGINE_KINDS}"
    )


class FSDPBackend:
    """Factory of FSDP2 engines for HF transformers models (one per role and process)."""

    config_cls: ClassVar[type[FSDPRoleConfig]] = FSDPRoleConfig

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
        kind: str | None = None,
        process_group: ProcessGroup | None = None,
        total_steps: int | None = None,
    ) -> FSDPEngine:
        """Build the engine of ``role`` in this process (FSDP2 over ``process_group``).

        ``config`` defaults to ``FSDPRoleConfig()`` (the default task's model).
        """
        config = config or FSDPRoleConfig()
        if not isinstance(config, FSDPRoleConfig):
            raise HfsdkError(
                f"the fsdp backend needs an FSDPRoleConfig for role {role!r}, got "
                f"{type(config).__name__}; set '{role}.backend: fsdp'"
            )
        engine_cls = cls.engine_class(kind or engine_kind(role))
        return engine_cls(config, role=role, process_group=process_group, total_steps=total_steps)
