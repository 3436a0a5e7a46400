"""Bad megatron layouts and unknown models fail in config validation, before Ray starts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import ConfigError


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory, tiny_assets: Any, save_tiny_llama: Any) -> str:
    """A tiny Llama directory: 4 heads, 2 key/value heads, 2 layers, FFN 64."""
    root = tmp_path_factory.mktemp("megatron-validation")
    return str(save_tiny_llama(root / "m", tiny_assets.tokenizer_dir))


def _actor(model: str, tp: int, pp: int, devices: int) -> list[str]:
    return [
        f"actor.model_path={model}",
        "actor.backend=megatron",
        f"actor.parallel.tp={tp}",
        f"actor.parallel.pp={pp}",
        f"placement.pools.global.devices={devices}",
    ]


def _error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, overrides)
    return str(info.value)


def test_tp_must_divide_the_heads(model: str) -> None:
    message = _error(_actor(model, tp=8, pp=1, devices=8))
    assert "actor.parallel.tp=8 does not divide the model's 4 attention heads" in message


def test_tp_times_pp_must_divide_the_devices(model: str) -> None:
    message = _error(_actor(model, tp=2, pp=1, devices=3))
    assert "tp=2 x pp=1 = 2 does not divide the 3 devices" in message


def test_pp_must_divide_the_layers(model: str) -> None:
    message = _error(_actor(model, tp=1, pp=3, devices=3))
    assert "actor.parallel.pp=3 does not divide the model's 2 layers" in message


def test_tp_must_divide_the_default_task_models_heads() -> None:
    # 4 heads: tp 2 and 4 take it, tp 3 does not.
    overrides = [
        "actor.backend=megatron",
        "actor.parallel.tp=3",
        "placement.pools.global.devices=3",
    ]
    assert "does not divide the model's 4 attention heads" in _error(overrides)


def test_unknown_architecture(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})
    )
    message = _error(_actor(str(tmp_path), tp=1, pp=1, devices=1))
    assert "'GPT2LMHeadModel'" in message and "does not know" in message


def test_a_good_layout_validates(model: str) -> None:
    config = load_run_config("grpo", None, _actor(model, tp=2, pp=2, devices=8))
    assert config.actor.parallel.tp == 2 and config.actor.mini_batch_size == 32  # the preset


def test_cli_prints_one_line_and_exits_2(
    model: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import hfsdk.core.workers as workers

    def no_ray(*_a: Any, **_k: Any) -> Callable[..., Any]:
        raise AssertionError("Ray must not start for a bad config")

    monkeypatch.setattr(workers, "connect", no_ray)
    with pytest.raises(SystemExit) as info:
        main(["run", "--algo", "grpo", *_actor(model, tp=8, pp=1, devices=8)])
    err = capsys.readouterr().err.strip()
    assert int(info.value.code or 0) == 2
    assert len(err.splitlines()) == 1 and "does not divide" in err


def test_rollout_layout_must_regroup_the_training_layout(model: str) -> None:
    # tp=2 training cannot generate at tp=4 (tg must divide t): one line, both layouts.
    message = _error([*_actor(model, tp=2, pp=1, devices=2), "actor.rollout_layout.tp=4"])
    assert "actor.rollout_layout" in message and "\n" not in message
    assert "(p=1, t=2, d=1)" in message or "(pp=1, tp=4)" in message
    # A valid pair passes.
    load_run_config(
        "grpo", None, [*_actor(model, tp=2, pp=1, devices=2), "actor.rollout_layout.tp=1"]
    )


def test_rollout_pipeline_stages_must_divide_the_training_stages(model: str) -> None:
    # (p=1, t=2) cannot generate over 2 stages at tp 1 (pg must divide p): one line.
    overrides = ["actor.rollout_layout.pp=2", "actor.rollout_layout.tp=1"]
    message = _error([*_actor(model, tp=2, pp=1, devices=2), *overrides])
    assert "\n" not in message and "pg must divide p" in message
    assert "(p=1, t=2, d=1)" in message and "(pg=2, tg=1, dg=1)" in message
    # Generation stages that regroup the training stages are accepted (they decode).
    load_run_config(
        "grpo",
        None,
        [
            *_actor(model, tp=2, pp=2, devices=4),
            "actor.rollout_layout.pp=2",
            "actor.rollout_layout.tp=1",
        ],
    )


def test_sequence_parallel_is_refused(model: str) -> None:
    message = _error(
        [*_actor(model, tp=2, pp=1, devices=2), "actor.parallel.sequence_parallel=true"]
    )
    assert "sequence_parallel is not supported" in message


def test_lora_is_refused_in_one_line(model: str) -> None:
    message = _error([*_actor(model, tp=1, pp=1, devices=1), "actor.lora.rank=8"])
    assert (
        "actor.lora.rank=8: LoRA is not supported by the megatron backend; set "
        "actor.lora.rank: 0 or use actor.backend: fsdp"
    ) in message


def test_megatron_roles_sharing_a_pool_need_one_layout_and_trained_ones_float32() -> None:
    shared = ["actor.backend=megatron", "reference.backend=megatron",
              "placement.pools.global.devices=2"]  # fmt: skip
    # Before: Ray started and the reference's worker failed (exit 3) after ~30 s.
    message = _error([*shared, "actor.parallel.tp=2", "reference.parallel.tp=1"])
    assert "reference.parallel (tp=1, pp=1) differs from actor.parallel (tp=2, pp=1)" in message
    load_run_config("grpo", None, [*shared, "actor.parallel.tp=2", "reference.parallel.tp=2"])
    # Before: accepted, and the actor trained in float32 all the same.
    message = _error([*shared, "actor.dtype=bfloat16"])
    assert message.startswith("actor.dtype=bfloat16: the megatron backend trains in float32")
    load_run_config("grpo", None, [*shared, "reference.dtype=bfloat16"])  # frozen: it computes so


def test_resume_accepts_gradient_checkpointing(tmp_path: Path) -> None:
    """An out-of-memory megatron run could not resume with gradient checkpointing on (fsdp's
    could): it changes no checkpoint state, only what the backward recomputes."""
    import torch

    from hfsdk.core.errors import HfsdkError
    from hfsdk.core.trainer.run_directory import RunDirectory

    step = tmp_path / "checkpoints" / "step_1"
    step.mkdir(parents=True)
    (step / "COMPLETE").write_text("1\n")
    torch.save({"step": 1}, step / "trainer_state.pt")
    megatron = ["actor.backend=megatron"]
    (tmp_path / "config.yaml").write_text(load_run_config("grpo", None, megatron).to_yaml())
    run = RunDirectory(tmp_path)
    run.check_config_matches(
        load_run_config("grpo", None, [*megatron, "actor.gradient_checkpointing=true"])
    )
    # What the checkpoint's state depends on is still refused.
    with pytest.raises(HfsdkError, match=r"different config \(actor\.mini_batch_size changed\)"):
        run.check_config_matches(
            load_run_config("grpo", None, [*megatron, "actor.mini_batch_size=4"])
        )


def test_mini_batch_size_must_split_over_the_data_parallel_replicas(model: str) -> None:
    # 4 devices at tp=2: dp=2. Before: accepted; Ray started, the models loaded and a whole
    # rollout ran before the first update refused it.
    message = _error([*_actor(model, tp=2, pp=1, devices=4), "actor.mini_batch_size=3"])
    assert message == (
        "actor.mini_batch_size=3 is not divisible by the 2 data-parallel replicas of actor "
        "(the 4 devices of pool 'global' / (tp=2 x pp=1)); make it a multiple of 2"
    )
    load_run_config(
        "grpo", None, [*_actor(model, tp=2, pp=1, devices=4), "actor.mini_batch_size=4"]
    )
    # A frozen megatron role splits no mini-batches: the reference's own is not checked.
    load_run_config(
        "grpo",
        None,
        [
            *_actor(model, tp=2, pp=1, devices=4),
            "reference.backend=megatron",
            "reference.parallel.tp=2",
            "reference.mini_batch_size=3",
        ],
    )


def test_a_mini_batch_that_splits_preference_pairs_is_refused_with_the_config(model: str) -> None:
    """DPO and reward-model mini-batches hold whole pairs on every data-parallel replica; a
    size that split them was refused only at the first update, after the models loaded and a
    rollout ran. Now at config load, in the engine's own message (fsdp's too)."""
    whole = r"mini_batch_size=3 does not split into whole groups of 2 rows"
    with pytest.raises(ConfigError, match=rf"actor\.{whole} .* 2 x 1 = 2"):
        load_run_config("dpo", None, ["actor.backend=megatron", "actor.mini_batch_size=3"])
    reward_model = ["reward_model.backend=megatron", "reward_model.mini_batch_size=3"]
    with pytest.raises(ConfigError, match=rf"reward_model\.{whole}"):
        load_run_config("reward_model", None, reward_model)
    # 4 devices at tp=2: dp=2, so whole pairs on each replica need a multiple of 4.
    layout = _actor(model, tp=2, pp=1, devices=4)
    with pytest.raises(ConfigError, match=r"actor\.mini_batch_size=6 .* = 4; set actor\.mini_"):
        load_run_config("dpo", None, [*layout, "actor.mini_batch_size=6"])
    load_run_config("dpo", None, [*layout, "actor.mini_batch_size=8"])
    frozen = ["reference.backend=megatron", "reference.mini_batch_size=3"]
    load_run_config("dpo", None, frozen)  # the reference never splits mini-batches
    load_run_config("grpo", None, ["actor.backend=megatron", "actor.mini_batch_size=3"])  # rows


@pytest.mark.parametrize("role", ["actor", "teacher"])
def test_top_k_distillation_is_refused_on_a_megatron_actor_or_teacher(role: str) -> None:
    # Before: accepted; refused only at the first step, after every model had loaded.
    with pytest.raises(ConfigError) as info:
        load_run_config("distill", None, [f"{role}.backend=megatron", "algorithm.top_k=4"])
    assert f"algorithm.top_k=4 with {role}.backend: megatron" in str(info.value)
    load_run_config("distill", None, [f"{role}.backend=megatron"])  # top_k 0: accepted


def test_one_layout_per_pool_only_under_fused_colocation() -> None:
    # Separate colocation runs one process per role: the reference may keep its own layout.
    shared = ["actor.backend=megatron", "reference.backend=megatron",
              "placement.pools.global.devices=2", "actor.parallel.tp=2",
              "reference.parallel.tp=1"]  # fmt: skip
    load_run_config("grpo", None, [*shared, "placement.colocation=separate"])
    message = _error(shared)
    assert "placement.colocation: separate" in message


def test_auto_placement_with_fused_colocation_needs_one_megatron_layout() -> None:
    # Before: accepted; the planner could put both roles in one fused pool, whose processes
    # then failed at worker start.
    roles = ["actor.backend=megatron", "reference.backend=megatron",
             "placement.pools.global.devices=2", "placement.mode=auto"]  # fmt: skip
    message = _error([*roles, "actor.parallel.tp=2", "reference.parallel.tp=1"])
    assert "reference.parallel (tp=1, pp=1) differs from actor.parallel (tp=2, pp=1)" in message
    assert "placement.mode: auto" in message and "placement.colocation: separate" in message
    assert "\n" not in message
    load_run_config("grpo", None, [*roles, "actor.parallel.tp=2", "reference.parallel.tp=2"])
    load_run_config(
        "grpo",
        None,
        [*roles, "actor.parallel.tp=2", "reference.parallel.tp=1", "placement.colocation=separate"],
    )
