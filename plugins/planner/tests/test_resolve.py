"""``placement: auto`` through ``hfsdk_resolve_placement``: the session's pools from the
planner, and one clear line when the planner is not there."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from hfsdk import HfsdkError, get_registry
from hfsdk.core.config import load_run_config
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk.core.trainer.session import TrainingSession


@pytest.fixture
def without_planner(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The process's plugin manager with the planner disabled, as a user would."""
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "planner")
    reset_plugin_manager()
    yield
    monkeypatch.delenv("HFSDK_DISABLE_PLUGINS")
    reset_plugin_manager()


def test_auto_placement_cluster_comes_from_config_or_detection() -> None:
    from hfsdk_planner.cluster_lookup import resolve_cluster

    assert load_run_config("grpo").placement.cluster == "auto"
    assert resolve_cluster("auto").name == "local"  # no CUDA on the test machine
    config = load_run_config("grpo", None, ["placement.cluster=a100-80gb"])
    assert resolve_cluster(config.placement.cluster).name == "a100-80gb"
    with pytest.raises(HfsdkError, match=r"placement\.cluster is 'tpu'; expected 'auto'"):
        load_run_config("grpo", None, ["placement.cluster=tpu"])


@pytest.mark.distributed
@pytest.mark.heavy
def test_auto_placement_builds_the_planned_pools() -> None:
    from hfsdk_planner.auto import auto_placement_section

    config = load_run_config(
        "grpo", None, ["placement.mode=auto", "placement.pools={global: {devices: 2}}"]
    )
    with TrainingSession(config, get_registry("algorithms")["grpo"].impl) as session:
        # The default task's reward is a function: the planner must not give it devices.
        plan = auto_placement_section(
            "grpo",
            model_size=session.assets.model_path,
            role_sizes={"reward": "function"},
            num_devices=2,
            cluster="local",
        )
        assert "reward" not in plan["roles"]
        for role in ("actor", "reference"):
            group = session.groups[role]
            pool = plan["roles"][role]
            assert group.pool.name == pool
            assert group.world_size == plan["pools"][pool]["devices"]


def test_auto_placement_prices_a_function_reward_as_no_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hfsdk_planner.auto as auto

    seen: dict[str, object] = {}
    real = auto.auto_placement_section

    def spy(algorithm: str, **kwargs: object) -> dict:
        seen.update(kwargs)
        return real(algorithm, **kwargs)

    monkeypatch.setattr(auto, "auto_placement_section", spy)
    config = load_run_config(
        "grpo", None, ["placement.mode=auto", "placement.pools={global: {devices: 2}}"]
    )
    session = TrainingSession(config, get_registry("algorithms")["grpo"].impl)
    placement = session._auto_placement()
    sizes = seen["role_sizes"]
    assert isinstance(sizes, dict)
    assert sizes["reward"] == "function"
    assert set(sizes) == {"actor", "reference", "reward"}
    assert "reward" not in placement.roles


def test_auto_placement_sizes_a_rollout_pool_under_an_overlapped_pipeline(tmp_path) -> None:

    import attrs

    from hfsdk_planner import get_cluster

    # Slow links: a replica of its own beats sharding the actor over both devices.
    slow = attrs.evolve(
        get_cluster("local"), intra_node_latency=5e-3, intra_node_bandwidth=1e8,
        inter_node_latency=5e-3, inter_node_bandwidth=1e8,
    )  # fmt: skip
    profile = tmp_path / "slow.yaml"
    slow.save(profile)
    overrides = [
        "placement.mode=auto",
        "placement.pools={global: {devices: 2}}",
        f"placement.cluster={profile}",
    ]
    for pipeline, pools in (("one_step_off", {"devices": 1}), ("sync", None)):
        config = load_run_config("grpo", None, [*overrides, f"trainer.pipeline={pipeline}"])
        placement = TrainingSession._auto_placement(types.SimpleNamespace(config=config))
        assert placement.mode == "manual"
        rollout = placement.pools.get("rollout")
        assert (rollout and {"devices": rollout.devices}) == pools
        assert sum(p.devices for p in placement.pools.values()) == 2


def test_the_session_asks_the_hook_once_and_builds_manual_pools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hfsdk_planner.plugin as plugin

    calls: list[object] = []

    def answer(config: object) -> dict:
        calls.append(config)
        return {"pools": {"a": {"devices": 1}, "b": {"devices": 1}},
                "roles": {"actor": "a", "reference": "b"}, "rollout_tp": {"actor": 1}}  # fmt: skip

    monkeypatch.setattr("hfsdk_planner.resolve.resolve_placement", answer)
    assert plugin.hfsdk_resolve_placement  # the hook the session reaches
    config = load_run_config(
        "grpo", None, ["placement.mode=auto", "placement.pools={global: {devices: 2}}"]
    )
    holder = types.SimpleNamespace(config=config)
    placement = TrainingSession._auto_placement(holder)
    assert calls == [config]
    assert placement.mode == "manual" and list(placement.pools) == ["a", "b"]
    assert placement.pool_of("reference") == "b" and holder._planned_rollout_tp == {"actor": 1}


def test_placement_auto_without_the_planner_names_the_distribution(without_planner) -> None:  # type: ignore[no-untyped-def]
    from hfsdk.core.trainer.preflight import check_features

    config = load_run_config(
        "grpo", None, ["placement.mode=auto", "placement.pools={global: {devices: 2}}"]
    )
    with pytest.raises(HfsdkError, match="install hfsdk-plugin-planner") as info:
        check_features(config)
    assert "\n" not in str(info.value)
    with pytest.raises(HfsdkError, match="install hfsdk-plugin-planner"):
        TrainingSession._auto_placement(types.SimpleNamespace(config=config))
    check_features(load_run_config("grpo"))  # a manual placement needs no planner


def test_placement_auto_without_the_planner_is_one_line_from_the_cli() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "HFSDK_DISABLE_PLUGINS": "planner"}
    code = "from hfsdk.core.cli.main import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "run", "--algo", "grpo", "placement.mode=auto"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "hfsdk-plugin-planner" in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr


def test_a_manual_run_trains_without_the_planner(without_planner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from hfsdk.core.trainer.trainer import Trainer

    with pytest.raises(HfsdkError, match="unknown registry kind 'clusters'"):
        get_registry("clusters")  # the kind and its presets went with the planner
    small = ["data.batch_size=4", "algorithm.n_samples_per_prompt=2", "actor.mini_batch_size=8"]
    config = load_run_config(
        "grpo", None, [*small, "trainer.total_steps=1", "trainer.loggers=[jsonl]"]
    )
    (row,) = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert row["timing/step_s"] > 0
    assert "perf/predicted_step_s" not in row  # no planner, no prediction observer


def test_a_cluster_name_is_the_planners_to_check(without_planner) -> None:  # type: ignore[no-untyped-def]
    # Only the planner reads placement.cluster: without it the name is not refused.
    assert load_run_config("grpo", None, ["placement.cluster=a100-80gb"]).placement.cluster


def test_the_planners_commands_without_it_name_the_distribution() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "HFSDK_DISABLE_PLUGINS": "planner"}
    code = "from hfsdk.core.cli.main import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "plan", "--algo", "grpo"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "hfsdk-plugin-planner" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def _llama_dir(tmp_path: Path, name: str, hidden: int, ffn: int, heads: int, layers: int) -> Path:
    """A model directory holding only a Llama ``config.json`` of the given shape."""
    import json

    model = tmp_path / name
    model.mkdir(exist_ok=True)
    shape = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
             "intermediate_size": ffn, "num_attention_heads": heads, "num_key_value_heads": heads,
             "num_hidden_layers": layers, "vocab_size": 32000, "max_position_embeddings": 4096}  # fmt: skip
    (model / "config.json").write_text(json.dumps(shape))
    return model


def _lora_13b_config(tmp_path: Path, pipeline: str):  # type: ignore[no-untyped-def]
    """A 13B LoRA GRPO run on 2 x A100 with the default small batch (16 prompts, 64+8 tokens)."""
    model = _llama_dir(tmp_path, "m13b", 5120, 13824, 40, 40)
    overrides = [
        "placement.mode=auto",
        "placement.pools={global: {devices: 2}}",
        "placement.cluster=a100-80gb",
        f"actor.model_path={model}",
        "actor.lora={rank: 8}",
        "actor.dtype=bfloat16",
        f"trainer.pipeline={pipeline}",
    ]
    return load_run_config("grpo", None, overrides)


@pytest.mark.parametrize("pipeline", ["sync", "one_step_off"])
def test_auto_placement_searches_with_the_runs_workload(tmp_path: Path, pipeline: str) -> None:
    # With the default workload (1024 prompts, 1024+1024 tokens, no LoRA) the search
    # refused this run as needing 4 devices, though it fits 2 (about 54 GB each).
    from hfsdk_planner.resolve import resolve_placement

    section = resolve_placement(_lora_13b_config(tmp_path, pipeline))
    assert sum(p["devices"] for p in section["pools"].values()) == 2
    assert {"actor", "reference"} <= set(section["roles"])


def test_auto_placement_keeps_a_multi_node_pools_nodes(tmp_path: Path) -> None:
    # A 33B GRPO run on 2 nodes of 8 A100s: the planner colocates both roles on all 16
    # devices; that pool must stay spread over 2 nodes, not become one 16-device node.
    model = _llama_dir(tmp_path, "m33b", 6656, 17920, 52, 60)
    overrides = [
        "placement.mode=auto",
        "placement.pools={global: {devices: 16, nodes: 2}}",
        "placement.cluster=a100-80gb",
        f"actor.model_path={model}",
    ]
    config = load_run_config("grpo", None, overrides)
    placement = TrainingSession._auto_placement(types.SimpleNamespace(config=config))
    assert sum(p.devices for p in placement.pools.values()) == 16
    assert max(p.devices for p in placement.pools.values()) > 8  # the case at stake
    for pool in placement.pools.values():
        assert pool.devices // pool.nodes <= 8, pool


def test_a_multi_node_rollout_pool_names_its_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hfsdk_planner.run_plan as run_plan

    # Price only the split of interest: 8 training devices and a 16-device rollout pool.
    monkeypatch.setattr(run_plan, "_split_candidates", lambda total: [16])
    model = _llama_dir(tmp_path, "m13b", 5120, 13824, 40, 40)
    overrides = [
        "placement.mode=auto",
        "placement.pools={global: {devices: 24, nodes: 3}}",
        "placement.cluster=a100-80gb",
        f"actor.model_path={model}",
        "trainer.pipeline=one_step_off",
    ]
    config = load_run_config("grpo", None, overrides)
    section, _plan = run_plan.plan_rollout_split(config, 24)
    assert section["pools"]["rollout"] == {"devices": 16, "nodes": 2}
