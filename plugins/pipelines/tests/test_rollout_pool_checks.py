"""The rollout pool's preflight check (``check_rollout_pool``): the policy never on the
replicas' pool, partial rollouts only under async with a pool of untensored replicas."""

from __future__ import annotations

from pathlib import Path

import pytest
from hfsdk_pipelines.pipeline import check_rollout_pool

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config


def test_a_rollout_pool_alone_leaves_the_roles_a_pool(tmp_path: Path) -> None:
    # Moved with the check from tests/core/trainer/test_placement_config.py.
    cfg = tmp_path / "c.yaml"
    cfg.write_text("placement:\n  pools:\n    rollout:\n      devices: 1\n")
    config = load_run_config("grpo", str(cfg), ["trainer.pipeline=one_step_off"])
    check_rollout_pool(config, "actor")  # not refused


def test_the_rollout_pool_never_receives_a_role_implicitly() -> None:
    overrides = [
        "placement.pools={rollout: {devices: 1}, train: {devices: 1}}",
        "trainer.pipeline=one_step_off",
    ]
    check_rollout_pool(load_run_config("grpo", None, overrides), "actor")
    # Placing the policy there by name is still refused, with what to do.
    named = load_run_config("grpo", None, [*overrides, "placement.roles.actor=rollout"])
    with pytest.raises(HfsdkError, match=r"set placement\.roles\.actor to another pool"):
        check_rollout_pool(named, "actor")


def test_tp_replicas_with_partial_rollouts_are_refused() -> None:
    config = load_run_config(
        "grpo", None, [
            "placement.pools.global.devices=1", "placement.pools.rollout.devices=2",
            "placement.pools.rollout.tp=2", "trainer.pipeline=async",
            "trainer.partial_rollout_tokens=2",
        ],
    )  # fmt: skip
    with pytest.raises(HfsdkError, match=r"partial_rollout_tokens=2 is not supported with"):
        check_rollout_pool(config, "actor")
    config = load_run_config(
        "grpo", None, [
            "placement.pools.global.devices=1", "placement.pools.rollout.devices=2",
            "placement.pools.rollout.pp=2", "trainer.pipeline=async",
            "trainer.partial_rollout_tokens=2",
        ],
    )  # fmt: skip
    with pytest.raises(HfsdkError, match=r"pipelined rollout replicas .*rollout.pp=2"):
        check_rollout_pool(config, "actor")


def test_the_hint_names_where_unlisted_roles_go() -> None:
    # Before: "roles not listed go to the first pool, so list another pool first", though
    # placement skips the rollout pool whatever the order.
    named = load_run_config(
        "grpo", None, [
            "placement.pools={rollout: {devices: 1}, train: {devices: 1}}",
            "placement.roles.actor=rollout",
        ],
    )  # fmt: skip
    with pytest.raises(HfsdkError) as info:
        check_rollout_pool(named, "actor")
    assert "roles not listed go to the first pool other than rollout" in str(info.value)
    assert "list another pool first" not in str(info.value)


@pytest.mark.parametrize(
    ("algo", "overrides", "why"),
    [
        ("dpo", [], "trains on the dataset's responses"),
        ("sft", [], "trains on the dataset's responses"),
        ("reward_model", [], "has no policy"),
        ("grpo", ["trainer.mode=train_only", "trainer.rollouts_from=/nowhere"], "train_only"),
    ],
)
def test_a_rollout_pool_nothing_samples_with_is_refused_with_the_config(
    algo: str, overrides: list[str], why: str
) -> None:
    # Before: accepted; the replicas took a device and (DPO, SFT) a generation and a weight
    # sync ran every step that nothing read; reward_model failed later at worker start.
    pools = ["placement.pools.global.devices=1", "placement.pools.rollout.devices=1"]
    with pytest.raises(HfsdkError, match=r"placement\.pools\.rollout") as info:
        load_run_config(algo, None, [*pools, *overrides])
    message = str(info.value)
    assert why in message and "remove placement.pools.rollout" in message
    assert "\n" not in message
