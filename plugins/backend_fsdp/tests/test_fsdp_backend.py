"""The ``fsdp`` backend factory: role names to engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
from hfsdk_backend_fsdp.critic import CriticEngine
from hfsdk_backend_fsdp.fsdp_backend import FSDPBackend, engine_kind
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.scorer import ScoreEngine


@pytest.mark.parametrize(
    ("role", "kind"),
    [
        ("actor", "actor"),
        ("reference", "reference"),
        ("ref", "reference"),
        ("critic", "critic"),
        ("reward_critic", "critic"),
        ("cost_critic", "critic"),
        ("reward", "score"),
        ("cost", "score"),
        ("cost_model", "score"),
    ],
)
def test_role_names_map_to_engine_kinds(role: str, kind: str) -> None:
    assert engine_kind(role) == kind


def test_unknown_roles_and_kinds_are_clear_errors() -> None:
    with pytest.raises(HfsdkError, match="does not know what role 'judge' is"):
        engine_kind("judge")
    with pytest.raises(HfsdkError, match="engine kind 'oracle' is unknown"):
        FSDPBackend.engine_class("oracle")


def test_create_engine_builds_the_role(model_dir: Path) -> None:
    config = FSDPRoleConfig(model_path=str(model_dir))
    expected = {
        "actor": ActorEngine,
        "reference": ReferenceEngine,
        "cost_critic": CriticEngine,
        "reward": ScoreEngine,
    }
    for role, cls in expected.items():
        engine = FSDPBackend.create_engine(role, config)
        assert type(engine) is cls and engine.role == role
    judge = FSDPBackend.create_engine("judge", config, kind="score")
    assert isinstance(judge, ScoreEngine)
    with pytest.raises(HfsdkError, match="needs an FSDPRoleConfig"):
        FSDPBackend.create_engine("actor", object())  # type: ignore[arg-type]


def test_plugin_registers_the_backends() -> None:
    import hfsdk
    from hfsdk_backend_fsdp.fsdp_config import HFRolloutConfig
    from hfsdk_backend_fsdp.hf_rollout import HFRollout

    training = hfsdk.get_registry("training_backends").get("fsdp")
    assert training.config_cls is FSDPRoleConfig
    rollout = hfsdk.get_registry("rollout_backends").get("hf")
    assert rollout.impl is HFRollout and rollout.config_cls is HFRolloutConfig
