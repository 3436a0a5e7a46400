"""The ``fsdp`` backend factory: declared role kinds to workers and engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.engine_support import ENGINE_OF_ROLE_KIND
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
from hfsdk_backend_fsdp.critic import CriticEngine
from hfsdk_backend_fsdp.fsdp_backend import FSDPBackend
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.scorer import ScoreEngine


@pytest.mark.parametrize(
    ("role_kind", "worker", "engine_kind"),
    [
        ("policy", "FSDPPolicyWorker", "actor"),
        ("frozen_policy", "FSDPReferenceWorker", "reference"),
        ("value", "FSDPValueWorker", "critic"),
        ("scorer", "FSDPScorerWorker", "score"),
    ],
)
def test_declared_role_kinds_pick_worker_and_engine(
    role_kind: str, worker: str, engine_kind: str
) -> None:
    cls = FSDPBackend.worker_class(role_kind)
    assert cls.__name__ == worker and cls.engine_kind == engine_kind
    assert ENGINE_OF_ROLE_KIND[role_kind] == engine_kind


def test_each_worker_exposes_only_its_kinds_operations() -> None:
    policy, value = FSDPBackend.worker_class("policy"), FSDPBackend.worker_class("value")
    assert hasattr(policy, "update_actor") and not hasattr(policy, "update_critic")
    assert hasattr(value, "update_critic") and not hasattr(value, "generate_sequences")


def test_unknown_roles_and_kinds_are_clear_errors() -> None:
    with pytest.raises(HfsdkError, match="serves role kinds"):
        FSDPBackend.worker_class("judge")
    with pytest.raises(HfsdkError, match="engine kind 'oracle' is unknown"):
        FSDPBackend.engine_class("oracle")


def test_create_engine_builds_the_role(model_dir: Path) -> None:
    config = FSDPRoleConfig(model_path=str(model_dir))
    # The role's name says nothing: the declared kind picks the engine.
    expected = {
        ("policy_a", "actor"): ActorEngine,
        ("anchor", "reference"): ReferenceEngine,
        ("cost_critic", "critic"): CriticEngine,
        ("judge", "score"): ScoreEngine,
    }
    for (role, kind), cls in expected.items():
        engine = FSDPBackend.create_engine(role, config, kind=kind)
        assert type(engine) is cls and engine.role == role
    with pytest.raises(HfsdkError, match="needs an FSDPRoleConfig"):
        FSDPBackend.create_engine("actor", object(), kind="actor")  # type: ignore[arg-type]


def test_plugin_registers_the_backends() -> None:
    import hfsdk
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig

    training = hfsdk.get_registry("training_backends").get("fsdp")
    assert training.config_cls is FSDPRoleConfig
    rollout = hfsdk.get_registry("rollout_backends").get("hf")
    assert rollout.impl is HFRollout and rollout.config_cls is HFRolloutConfig
    # The core names no backend: these entries declare themselves the defaults.
    assert set(training.extra["default_for"]) == set(hfsdk.ROLE_KINDS)
    assert rollout.extra["default"] is True
