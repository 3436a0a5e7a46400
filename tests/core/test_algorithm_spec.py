"""AlgorithmSpec role rules: one policy, or none and a trained score model."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk import AlgorithmConfig, AlgorithmSpec


def _spec(*roles: tuple[str, str]) -> AlgorithmSpec:
    return AlgorithmSpec(name="x", program=object, config_cls=AlgorithmConfig, roles=roles)


def test_a_spec_needs_a_policy_or_a_score_model() -> None:
    with pytest.raises(ValueError, match="exactly one role of kind 'policy'"):
        _spec(("reference", "frozen_policy"), ("reward", "scorer"))
    with pytest.raises(ValueError, match="exactly one role of kind 'policy'"):
        _spec(("a", "policy"), ("b", "policy"))


def test_a_score_model_spec_generates_nothing_and_trains_its_model() -> None:
    spec = _spec(("rm", "score_model"))
    assert spec.main_role == "rm" and not spec.has_policy
    stages = {s.name: s for s in spec.dataflow.stages}
    assert "generation" not in stages
    assert stages["training"].timed_names == ("update_score_model",)
    with pytest.raises(hfsdk.HfsdkError, match="no role of kind 'policy'"):
        _ = spec.policy_role


def test_with_a_policy_the_main_role_is_the_policy() -> None:
    spec = _spec(("actor", "policy"), ("rm", "score_model"))
    assert spec.main_role == "actor"
    training = next(s for s in spec.dataflow.stages if s.name == "training")
    assert training.timed_names == ("update_score_model", "update_actor")


def test_configure_gives_the_run_its_own_roles() -> None:
    import attrs

    def one_reference_per_name(spec: AlgorithmSpec, algorithm: object) -> AlgorithmSpec:
        names = getattr(algorithm, "names", ())
        extra = tuple(hfsdk.RoleSpec(name=n, kind="frozen_policy") for n in names)
        return attrs.evolve(spec, roles=(*spec.roles, *extra), configure=None)

    spec = attrs.evolve(_spec(("actor", "policy")), configure=one_reference_per_name)
    assert spec.for_run(None) is spec  # no algorithm section (it did not resolve)
    run = spec.for_run(type("Config", (), {"names": ("ref_a", "ref_b")})())
    assert run.role_names == ("actor", "ref_a", "ref_b")
    assert spec.role_names == ("actor",)  # the registered spec is unchanged
    # The derived stages follow the run's roles (the references' log-prob stage).
    assert "ref_a" in {role for s in run.dataflow.stages for role, _ in s.work}
    plain = _spec(("actor", "policy"))
    assert plain.for_run(object()) is plain
