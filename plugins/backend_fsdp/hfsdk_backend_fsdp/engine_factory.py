"""Building an FSDP role engine of a given kind (what the workers and tests construct)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfsdk import HfsdkError
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

    from hfsdk_backend_fsdp.engine import FSDPEngine

ENGINE_KINDS = ("actor", "reference", "critic", "score", "score_model")


def engine_class(kind: str) -> type[FSDPEngine]:
    """The engine class of ``kind`` (one of :data:`ENGINE_KINDS`)."""
    from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
    from hfsdk_backend_fsdp.critic import CriticEngine
    from hfsdk_backend_fsdp.scorer import ScoreEngine, TrainableScoreEngine

    classes: dict[str, type[FSDPEngine]] = {
        "actor": ActorEngine,
        "reference": ReferenceEngine,
        "critic": CriticEngine,
        "score": ScoreEngine,
        "score_model": TrainableScoreEngine,
    }
    if kind not in classes:
        raise HfsdkError(f"engine kind {kind!r} is unknown; expected one of {ENGINE_KINDS}")
    return classes[kind]


def create_engine(
    role: str,
    config: FSDPRoleConfig | None = None,
    *,
    kind: str,
    process_group: ProcessGroup | None = None,
    total_steps: int | None = None,
) -> FSDPEngine:
    """Build the engine of ``role`` in this process (FSDP2 over ``process_group``).

    ``kind`` is an engine kind (``actor``, ``reference``, ``critic``, ``score``;
    see ``hfsdk_backend_common.engine_support.ENGINE_OF_ROLE_KIND``); ``config``
    defaults to ``FSDPRoleConfig()`` (the default task's model).
    """
    config = config or FSDPRoleConfig()
    if not isinstance(config, FSDPRoleConfig):
        raise HfsdkError(
            f"the fsdp backend needs an FSDPRoleConfig for role {role!r}, got "
            f"{type(config).__name__}; set '{role}.backend: fsdp'"
        )
    cls = engine_class(kind)
    return cls(config, role=role, process_group=process_group, total_steps=total_steps)
