"""``hfsdk config import``: source units and source defaults carried over, not copied 1:1."""

from __future__ import annotations

from typing import Any

from hfsdk.core.config import resolve_run_config
from hfsdk_migration.importing import import_config

TRL_GRPO = {
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "steps_per_generation": 4,
    "num_generations": 8,
    "num_iterations": 2,
    "lr_scheduler_type": "cosine",
}
"""8 optimizer steps per generation round: 32 responses / 8 per step, 2 iterations."""


def _verl_dapo(manager: str, section: str = "reward_model") -> dict[str, Any]:
    """verl's DAPO recipe script: overlong shaping set through the DAPO reward manager."""
    return {
        "algorithm": {"adv_estimator": "grpo", "filter_groups": {"enable": True}},
        "actor_rollout_ref": {"rollout": {"n": 4}},
        "data": {"max_response_length": 20480},
        section: {
            "enable": False,
            "reward_manager": manager,
            "reward_kwargs": {
                "overlong_buffer_cfg": {"enable": True, "len": 4096, "penalty_factor": 0.5},
            },
        },
    }


def test_trl_grpo_steps_are_converted_from_optimizer_steps_to_rounds() -> None:
    result = import_config("trl", {**TRL_GRPO, "max_steps": 400, "warmup_steps": 40})
    cfg = resolve_run_config(None, result.config)
    assert cfg.trainer.total_steps == 50 and cfg.actor.optim.warmup_steps == 5
    assert result.warnings == ()


def test_trl_grpo_steps_not_divisible_are_rounded_and_said() -> None:
    result = import_config("trl", {**TRL_GRPO, "max_steps": 401, "warmup_steps": 43})
    assert result.config["trainer"]["total_steps"] == 51  # rounded up
    assert result.config["actor"]["optim"]["warmup_steps"] == 5
    assert any("max_steps=401" in line and "up to 51" in line for line in result.warnings)
    assert any("warmup_steps=43" in line for line in result.warnings)
    assert "# warning: max_steps=401" in result.to_yaml()


def test_trl_defaults_that_differ_from_hfsdk_are_assumed() -> None:
    grpo = import_config("trl", {"num_generations": 8})
    cfg = resolve_run_config(None, grpo.config)
    assert cfg.rollout.max_response_length == 256 and "max_completion_length=256" in grpo.assumed
    ppo = import_config("trl", {"num_ppo_epochs": 4, "lr_scheduler_type": "constant"})
    cfg = resolve_run_config(None, ppo.config)
    assert cfg.rollout.max_response_length == 53 and cfg.rollout.temperature == 0.7
    assert {"response_length=53", "temperature=0.7"} <= set(ppo.assumed)


def test_trl_unset_lr_scheduler_is_listed_as_linear() -> None:
    result = import_config("trl", {"num_generations": 8})
    assert result.config.get("actor", {}).get("optim", {}).get("lr_schedule") is None
    (line,) = [line for line in result.unmapped if line.startswith("lr_scheduler_type")]
    assert "'linear' (unset: the default)" in line and "constant, cosine" in line


def test_trl_ppo_batches_are_multiplied_by_the_process_count() -> None:
    data = {"num_ppo_epochs": 4, "per_device_train_batch_size": 8,
            "gradient_accumulation_steps": 2, "num_mini_batches": 2, "num_processes": 4}  # fmt: skip
    cfg = resolve_run_config(None, import_config("trl", data).config)
    assert cfg.data.batch_size == 128 and cfg.actor.mini_batch_size == 64
    assert cfg.critic.mini_batch_size == 64 and cfg.actor.micro_batch_size == 8
    assert cfg.placement.pools["global"].devices == 4


def test_openrlhf_schedule_and_value_clip_defaults_are_assumed() -> None:
    result = import_config("openrlhf", {"advantage_estimator": "gae"})
    cfg = resolve_run_config(None, result.config)
    for optim in (cfg.actor.optim, cfg.critic.optim):
        assert (optim.lr_schedule, optim.min_lr_ratio) == ("cosine", 0.1)
    assert cfg.value_loss.clip_range_value == 0.5
    assert {"lr_scheduler='cosine_with_min_lr'", "value_clip=0.5"} <= set(result.assumed)
    (line,) = [line for line in result.unmapped if line.startswith("lr_warmup_ratio")]
    assert "0.03 (unset: the default)" in line


def test_openrlhf_warmup_ratio_is_converted_with_the_total_steps() -> None:
    result = import_config("openrlhf", {"max_steps": 100})
    cfg = resolve_run_config(None, result.config)
    assert cfg.actor.optim.warmup_steps == cfg.critic.optim.warmup_steps == 3  # ceil(0.03 x 100)
    assert not any(line.startswith("lr_warmup_ratio") for line in result.unmapped)


def test_verl_dapo_manager_overlong_buffer_cfg_maps_to_dapo() -> None:
    for section in ("reward_model", "reward"):
        result = import_config("verl", _verl_dapo("dapo", section))
        algorithm = result.config["algorithm"]
        assert result.config["algo"] == "dapo"
        assert (algorithm["overlong_buffer_len"], algorithm["overlong_penalty_factor"]) == (
            4096,
            0.5,
        )
        assert not any("reward_" in line for line in result.unmapped)


def test_verl_reward_manager_left_with_the_reward_model_off_is_listed() -> None:
    # Only the dapo manager reads overlong_buffer_cfg: with another one it is listed.
    result = import_config("verl", _verl_dapo("prime"))
    assert "overlong_buffer_len" not in result.config["algorithm"]
    joined = "\n".join(result.unmapped)
    assert "reward_model.reward_manager = 'prime'  (no counterpart for verl's 'prime'" in joined
    assert "reward_model.reward_kwargs.* (3 keys)" in joined


def test_verl_global_micro_batches_say_to_divide_by_the_gpu_count() -> None:
    data = {"actor_rollout_ref": {"actor": {"ppo_micro_batch_size": 64}}}
    (line,) = import_config("verl", data).unmapped
    assert line.startswith("actor_rollout_ref.actor.ppo_micro_batch_size = 64  (verl's global")
    assert "÷ the GPU count" in line


def test_trl_constant_schedule_has_no_warmup_and_constant_with_warmup_has() -> None:
    plain = import_config("trl", {**TRL_GRPO, "lr_scheduler_type": "constant", "warmup_steps": 40})
    assert plain.config["actor"]["optim"]["lr_schedule"] == "constant"
    assert "warmup_steps" not in plain.config["actor"]["optim"]
    (line,) = [line for line in plain.unmapped if line.startswith("warmup_steps")]
    assert "has no warmup" in line
    warm = import_config(
        "trl", {**TRL_GRPO, "lr_scheduler_type": "constant_with_warmup", "warmup_steps": 40}
    )
    cfg = resolve_run_config(None, warm.config)
    assert cfg.actor.optim.lr_schedule == "constant" and cfg.actor.optim.warmup_steps == 5


def test_a_warm_up_longer_than_the_default_run_imports_when_the_source_counts_epochs() -> None:
    # The run length is the user's to set (num_train_epochs is listed); hfsdk's default
    # length must not make the cosine warm-up look like a fault of the source.
    source = {"lr_scheduler_type": "cosine", "warmup_steps": 50, "num_train_epochs": 3}
    result = import_config("trl", source)
    assert result.config["actor"]["optim"]["warmup_steps"] == 50
    assert "total_steps" not in result.config.get("trainer", {})
    assert any(line.startswith("num_train_epochs") for line in result.unmapped)


def test_trl_and_openrlhf_weight_decay_skips_norms_and_biases() -> None:
    """Both exclude biases and norm weights from decay; hfsdk's default decays them."""
    trl = resolve_run_config(None, import_config("trl", {**TRL_GRPO, "weight_decay": 0.1}).config)
    assert trl.actor.optim.weight_decay == 0.1
    assert trl.actor.optim.decay_norms_and_biases is False
    data = {"advantage_estimator": "gae", "l2": 0.1}
    openrlhf = resolve_run_config(None, import_config("openrlhf", data).config)
    for optim in (openrlhf.actor.optim, openrlhf.critic.optim):
        assert optim.weight_decay == 0.1 and optim.decay_norms_and_biases is False
