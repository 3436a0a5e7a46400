"""``hfsdk config import``: source units and source defaults carried over, not copied 1:1."""

from __future__ import annotations

from typing import Any

import pytest

from hfsdk.core.config import resolve_run_config
from hfsdk_migration.importing import import_config, read_source

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


@pytest.mark.parametrize("metric", ["seq_reward", "seq_final_reward"])
def test_verl_filter_on_the_shaped_reward_is_listed_when_overlong_shaping_is_on(
    metric: str,
) -> None:
    # verl's seq_reward / seq_final_reward include the overlong penalty; hfsdk filters on the
    # score before it, so the groups kept would differ.
    data = _verl_dapo("dapo")
    data["algorithm"]["filter_groups"]["metric"] = metric
    result = import_config("verl", data)
    (line,) = [line for line in result.unmapped if "filter_groups.metric" in line]
    assert line.startswith(f"algorithm.filter_groups.metric = {metric!r}  (hfsdk's dynamic")
    assert "before the overlong penalty" in line and "metric=score" in line


@pytest.mark.parametrize("metric", ["acc", "score", "seq_reward", "seq_final_reward"])
def test_verl_filter_metric_maps_when_it_equals_the_score(metric: str) -> None:
    # Without overlong shaping (and with no KL, which dapo refuses) every metric is the score.
    data = _verl_dapo("dapo")
    data["algorithm"]["filter_groups"]["metric"] = metric
    data["reward_model"]["reward_kwargs"]["overlong_buffer_cfg"]["enable"] = False
    result = import_config("verl", data)
    assert result.config["algorithm"]["dynamic_sampling"] is True
    assert not any("filter_groups" in line for line in result.unmapped)


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


TRL_K4 = {"num_generations": 8, "per_device_train_batch_size": 8, "num_iterations": 4,
          "max_steps": 400, "warmup_steps": 40, "max_prompt_length": 256}  # fmt: skip
"""The reviewer's run: 8 responses a round, 1 optimizer step each of 4 iterations: k = 4."""


def test_trl_save_and_eval_steps_are_converted_like_max_steps() -> None:
    # All four count TRL optimizer steps; hfsdk's total, warmup, save and val count rounds.
    data = {**TRL_K4, "save_steps": 100, "eval_steps": 100, "eval_strategy": "steps"}
    cfg = resolve_run_config(None, import_config("trl", data).config)
    assert (cfg.trainer.total_steps, cfg.actor.optim.warmup_steps) == (100, 10)
    assert (cfg.trainer.save_every, cfg.trainer.val_every) == (25, 25)
    inexact = import_config("trl", {**data, "save_steps": 10, "eval_steps": 2})
    trainer = inexact.config["trainer"]
    assert (trainer["save_every"], trainer["val_every"]) == (2, 1)  # 2.5 rounded; at least 1
    assert any(w.startswith("save_steps=10 TRL optimizer steps is 2.5") for w in inexact.warnings)
    assert any(w.startswith("eval_steps=2 TRL optimizer steps is 0.5") for w in inexact.warnings)


@pytest.mark.parametrize("strategy", [None, "no", False])  # False: `--eval_strategy no` parsed
def test_trl_eval_steps_without_eval_strategy_steps_are_listed(strategy: object) -> None:
    # transformers' default eval_strategy is "no": TRL never evaluates, whatever eval_steps says.
    data = {**TRL_K4, "eval_steps": 100, "eval_strategy": strategy}
    result = import_config("trl", data)
    assert "val_every" not in result.config.get("trainer", {})
    (line,) = [u for u in result.unmapped if u.startswith("eval_steps")]
    assert "TRL does not evaluate with eval_strategy='no'" in line
    assert not any(u.startswith("eval_strategy") for u in result.unmapped)


def test_trl_eval_strategy_no_survives_the_command_line() -> None:
    flags = ["--eval_strategy", "no", "--eval_steps", "100", "--max_steps", "400"]
    data, _ = read_source("trl", None, flags)
    result = import_config("trl", data)
    assert "val_every" not in result.config.get("trainer", {})
    assert any(u.startswith("eval_steps = 100  (TRL does not evaluate") for u in result.unmapped)


def test_trl_and_openrlhf_have_no_dual_clip_unless_asked() -> None:
    # Neither TRL's GRPO/PPO loss nor OpenRLHF's (without --dual_clip) bounds negative
    # advantages; hfsdk's ppo_clip does by default (clip_ratio_c 3.0).
    for source, data in (
        ("trl", TRL_K4),
        ("trl", {"num_ppo_epochs": 4}),
        ("openrlhf", {"advantage_estimator": "gae"}),
        ("openrlhf", {"advantage_estimator": "group_norm", "n_samples_per_prompt": 4}),
    ):
        result = import_config(source, data)
        assert result.config["policy_loss"]["clip_ratio_c"] is None, (source, data)
        assert resolve_run_config(None, result.config).policy_loss.clip_ratio_c is None
    # GSPO's loss has no dual clip to turn off.
    gspo = import_config("trl", {**TRL_K4, "importance_sampling_level": "sequence"})
    assert "clip_ratio_c" not in gspo.config["policy_loss"]
    resolve_run_config(None, gspo.config)
    dual = import_config("openrlhf", {"advantage_estimator": "gae", "dual_clip": 10})
    assert resolve_run_config(None, dual.config).policy_loss.clip_ratio_c == 10.0
    assert not any(u.startswith("dual_clip") for u in dual.unmapped)


def test_openrlhf_without_apply_chat_template_keeps_prompts_as_written() -> None:
    # OpenRLHF reads the input_key text as it is; hfsdk's null would apply the template.
    result = import_config("openrlhf", {"input_template": "User: {}\nAssistant: "})
    assert result.config["data"]["apply_chat_template"] is False
    (line,) = [u for u in result.unmapped if u.startswith("input_template")]
    assert "no hfsdk counterpart" in line and "prompt column" in line
    chat = import_config("openrlhf", {"apply_chat_template": True, "input_template": "{}"})
    assert chat.config["data"]["apply_chat_template"] is True
    (line,) = [u for u in chat.unmapped if u.startswith("input_template")]
    assert "OpenRLHF ignores it with --apply_chat_template" in line
    # On the command line "User: {}" reads as a YAML mapping; it is still the same flag.
    data, _ = read_source("openrlhf", None, ["--input_template", "User: {}"])
    lines = import_config("openrlhf", data).unmapped
    assert any(u.startswith("input_template") and "no hfsdk counterpart" in u for u in lines)


def test_trl_run_length_left_out_is_listed_as_three_epochs() -> None:
    # Neither max_steps nor num_train_epochs: TRL trains 3 epochs, hfsdk counts steps.
    for data in ({"num_generations": 8}, {"num_generations": 8, "max_steps": -1}):
        result = import_config("trl", data)
        assert "total_steps" not in result.config.get("trainer", {})
        (line,) = [u for u in result.unmapped if u.startswith("num_train_epochs")]
        assert line.startswith("num_train_epochs = 3.0 (unset: the default)")
        assert "hfsdk counts steps: set trainer.total_steps" in line
        assert not any(u.startswith("max_steps") for u in result.unmapped)
    given = import_config("trl", {"num_generations": 8, "max_steps": 10})
    assert not any(u.startswith("num_train_epochs") for u in given.unmapped)


@pytest.mark.parametrize(
    ("source", "data", "hint"),
    [
        ("trl", {"learnig_rate": 3e-6, "max_steps": 100}, "learning_rate"),
        ("openrlhf", {"actor_learnig_rate": 3e-6, "max_steps": 100}, "actor_learning_rate"),
    ],
)
def test_a_misspelt_key_is_listed_with_a_suggestion(source: str, data: dict, hint: str) -> None:
    # It was listed as "not mapped" without a reason while the source's default was kept.
    # Listed, not refused: a real key the importer's lists miss must not stop an import.
    (line,) = [u for u in import_config(source, data).unmapped if "learnig_rate" in u]
    assert f"did you mean '{hint}'?" in line and "default is kept" in line


def test_real_trl_keys_are_never_taken_for_misspellings() -> None:
    # num_generations_eval (TRL's GRPOConfig) was refused as a misspelt num_generations.
    lines = import_config("trl", {"num_generations_eval": 4, "max_steps": 10}).unmapped
    assert "num_generations_eval = 4  (no hfsdk counterpart)" in lines


@pytest.mark.parametrize(
    ("source", "data"),
    [
        ("trl", {"max_steps": 100, "frobnicate": 1, "logging_steps": 10}),
        ("openrlhf", {"max_steps": 100, "frobnicate": 1, "logging_steps": 10}),
    ],
)
def test_every_key_left_unmapped_is_listed_with_a_reason(source: str, data: dict) -> None:
    # docs/migrating.md: every listed key has a reason; a real key without a counterpart
    # (logging_steps) is listed, not refused as a misspelling of save_steps/eval_steps.
    lines = import_config(source, data).unmapped
    (unknown,) = [u for u in lines if u.startswith("frobnicate")]
    assert "unknown to this importer" in unknown
    (real,) = [u for u in lines if u.startswith("logging_steps")]
    assert real.endswith(")") and "  (" in real
    assert all(u.endswith(")") for u in lines), lines


def test_trl_warmup_ratio_is_converted_with_the_total_steps() -> None:
    # 8 optimizer steps per round: max_steps=400 is 50 rounds, 10% of them is 5.
    result = import_config("trl", {**TRL_GRPO, "max_steps": 400, "warmup_ratio": 0.1})
    assert result.config["actor"]["optim"]["warmup_steps"] == 5
    assert not any(u.startswith("warmup_ratio") for u in result.unmapped)
    assert result.warnings == ()
    # 0.1 x 401 optimizer steps is 40.1 (TRL: 41); ceil(0.1 x 51 rounds) = 6 rounds = 48.
    inexact = import_config("trl", {**TRL_GRPO, "max_steps": 401, "warmup_ratio": 0.1})
    assert inexact.config["actor"]["optim"]["warmup_steps"] == 6
    assert any(w.startswith("warmup_ratio=0.1") for w in inexact.warnings)
    unknown = import_config("trl", {**TRL_GRPO, "warmup_ratio": 0.1})
    (line,) = [u for u in unknown.unmapped if u.startswith("warmup_ratio")]
    assert "needs the total steps" in line
    assert "warmup_steps" not in unknown.config["actor"]["optim"]


def test_trl_fractional_steps_are_ratios_of_max_steps() -> None:
    # transformers reads save_steps/eval_steps/warmup_steps below 1 as ratios of the run.
    data = {**TRL_K4, "lr_scheduler_type": "cosine", "warmup_steps": 0.1, "save_steps": 0.25,
            "eval_strategy": "steps", "eval_steps": 0.1}  # fmt: skip
    cfg = resolve_run_config(None, import_config("trl", data).config)
    assert (cfg.trainer.total_steps, cfg.actor.optim.warmup_steps) == (100, 10)
    assert (cfg.trainer.save_every, cfg.trainer.val_every) == (25, 10)
    unset = {k: v for k, v in data.items() if k != "max_steps"}
    result = import_config("trl", unset)
    for key in ("warmup_steps", "save_steps", "eval_steps"):
        (line,) = [u for u in result.unmapped if u.startswith(f"{key} = ")]
        assert "a ratio of max_steps, which is not set" in line


def test_verl_weight_decay_left_out_is_verls_default() -> None:
    # verl's AdamW decays by 0.01 unless told otherwise; hfsdk's default is 0.
    result = import_config("verl", {"algorithm": {"adv_estimator": "gae"}})
    assert result.config["actor"]["optim"]["weight_decay"] == 0.01
    assert result.config["critic"]["optim"]["weight_decay"] == 0.01
    assert "actor_rollout_ref.actor.optim.weight_decay=0.01" in result.assumed
    assert "critic.optim.weight_decay=0.01" in result.assumed


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from hfsdk.core.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


VERL_LORA = {
    "algorithm": {"adv_estimator": "grpo"},
    "actor_rollout_ref": {
        "model": {"path": "/models/qwen", "lora_rank": 16, "lora_alpha": 32,
                  "target_modules": "all-linear"},
        "rollout": {"n": 4},
    },
}  # fmt: skip
"""The repro: a verl GRPO run with LoRA on the actor (verl's all-linear targets)."""


@pytest.mark.parametrize(
    ("source", "args"),
    [
        ("verl", ["actor_rollout_ref.model.path=/models/qwen", "algorithm.adv_estimator=grpo",
                  "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.model.lora_rank=16",
                  "actor_rollout_ref.model.lora_alpha=32",
                  "actor_rollout_ref.model.target_modules=all-linear"]),
        ("trl", ["--model_name_or_path", "/models/qwen", "--use_peft", "true", "--lora_r", "16",
                 "--lora_alpha", "32", "--lora_target_modules", "q_proj", "v_proj",
                 "--num_generations", "4", "--max_steps", "10"]),
        ("openrlhf", ["--pretrain", "/models/qwen", "--lora_rank", "16", "--lora_alpha", "32",
                      "--advantage_estimator", "reinforce", "--max_steps", "10"]),
    ],
)  # fmt: skip
def test_a_lora_run_imports_as_actor_lora_and_the_written_file_loads(
    source: str, args: list[str], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was listed as "no hfsdk counterpart" and imported as a full fine-tune.
    from hfsdk.core.config import load_run_config

    out = tmp_path / "run.yaml"
    code, printed, err = _hfsdk(
        capsys, "config", "import", "--from", source, *args, "--out", str(out)
    )
    assert code == 0, err
    listed = [line for line in (printed + err).splitlines() if not line.startswith("wrote ")]
    assert not [line for line in listed if "lora" in line or "target_modules" in line], listed
    cfg = load_run_config(None, str(out), [])
    assert (cfg.actor.lora.rank, cfg.actor.lora.alpha) == (16, 32.0)
    targets = {"trl": ("q_proj", "v_proj")}.get(source, ("all-linear",))
    assert cfg.actor.lora.target_modules == targets
    code, shown, err = _hfsdk(capsys, "config", "show", "--config", str(out))
    assert code == 0, err
    assert "rank: 16" in shown


def test_verl_lora_maps_its_defaults_and_lists_what_hfsdk_lacks() -> None:
    # verl's lora_alpha (16) and target_modules (all-linear) apply when only the rank is set.
    data = {**VERL_LORA, "actor_rollout_ref": {**VERL_LORA["actor_rollout_ref"],
            "model": {"path": "/models/qwen", "lora_rank": 8}}}  # fmt: skip
    result = import_config("verl", data)
    assert result.config["actor"]["lora"] == {
        "rank": 8, "alpha": 16.0, "target_modules": ["all-linear"],
    }  # fmt: skip
    assert "actor_rollout_ref.model.target_modules='all-linear'" in result.assumed
    resolve_run_config(None, result.config)
    # hfsdk generates for a LoRA actor at tp 1 (its merged weights are not sliced).
    rollout = {"n": 4, "name": "hf", "tensor_model_parallel_size": 2}
    tp = import_config("verl", {**data, "trainer": {"n_gpus_per_node": 2},
                                "actor_rollout_ref": {**data["actor_rollout_ref"],
                                                      "rollout": rollout}})  # fmt: skip
    assert "rollout_layout" not in tp.config["actor"]
    (line,) = [u for u in tp.unmapped if "tensor_model_parallel_size" in u]
    assert "hfsdk generates for a LoRA actor at tp 1" in line
    model = {"path": "/models/qwen", "lora_rank": 8, "target_modules": ["q_proj", "v_proj"],
             "exclude_modules": ".*mlp.*", "lora_adapter_path": "/ckpt/adapter"}  # fmt: skip
    data = {**VERL_LORA, "actor_rollout_ref": {**VERL_LORA["actor_rollout_ref"], "model": model}}
    result = import_config("verl", data)
    assert result.config["actor"]["lora"]["target_modules"] == ["q_proj", "v_proj"]
    (exclude,) = [u for u in result.unmapped if u.startswith(M_ + "exclude_modules")]
    assert "hfsdk has no exclude_modules" in exclude
    (adapter,) = [u for u in result.unmapped if u.startswith(M_ + "lora_adapter_path")]
    assert "hfsdk starts new adapters" in adapter
    # Rank 0 is LoRA off: nothing is written and its settings are not listed.
    off = {"path": "/models/qwen", "lora_rank": 0, "lora_alpha": 32, "target_modules": "all-linear"}
    data = {**VERL_LORA, "actor_rollout_ref": {**VERL_LORA["actor_rollout_ref"], "model": off}}
    result = import_config("verl", data)
    assert "lora" not in result.config["actor"] and result.unmapped == ()


M_ = "actor_rollout_ref.model."


def test_verl_lora_on_the_critic_or_a_megatron_actor_is_listed_not_mapped() -> None:
    # hfsdk refuses LoRA on the critic and on the megatron backend: listed with why.
    data = {
        "algorithm": {"adv_estimator": "gae"},
        "actor_rollout_ref": {"model": {"path": "/models/qwen", "lora_rank": 16}},
        "critic": {"model": {"path": "/models/qwen", "lora_rank": 8, "lora_alpha": 16,
                             "target_modules": "all-linear"}},
    }  # fmt: skip
    result = import_config("verl", data)
    assert result.config["actor"]["lora"]["rank"] == 16
    assert "lora" not in result.config["critic"]
    (line,) = [u for u in result.unmapped if "lora" in u or "target_modules" in u]
    assert line.startswith("critic.model.lora_rank = 8") and "only on the actor" in line
    resolve_run_config(None, result.config)
    data["actor_rollout_ref"]["model"]["lora_rank"] = 0  # verl's tree: the actor's off
    lines = import_config("verl", data).unmapped
    assert [u for u in lines if "lora" in u] == [line]
    megatron = {
        "algorithm": {"adv_estimator": "grpo"},
        "actor_rollout_ref": {
            "actor": {"strategy": "megatron"},
            "model": {"path": "/models/qwen", "lora_rank": 0, "lora": {"rank": 16, "alpha": 32}},
            "rollout": {"n": 4},
        },
    }
    result = import_config("verl", megatron)
    assert "lora" not in result.config["actor"]
    (line,) = [u for u in result.unmapped if "lora" in u]
    assert line.startswith(M_ + "lora.* (2 keys)") and "megatron backend has no LoRA" in line


def test_trl_use_peft_maps_lora_with_trls_defaults() -> None:
    # use_peft alone: TRL's ModelConfig lora_r=16, lora_alpha=32, lora_dropout=0.05, and
    # peft's targets for Llama/Qwen2/Mistral models (q_proj, v_proj).
    result = import_config("trl", {"use_peft": True, "max_steps": 10})
    assert result.config["actor"]["lora"] == {
        "rank": 16, "alpha": 32.0, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"],
    }  # fmt: skip
    assert "lora_r=16" in result.assumed
    assert any("q_proj" in w and "peft" in w for w in result.warnings)
    resolve_run_config(None, result.config)
    # What hfsdk's LoRA lacks is listed with the reason.
    data = {"use_peft": True, "lora_r": 8, "lora_target_modules": "all-linear",
            "use_dora": True, "use_rslora": True, "lora_modules_to_save": ["lm_head"],
            "lora_task_type": "SEQ_CLS", "max_steps": 10}  # fmt: skip
    result = import_config("trl", data)
    assert result.config["actor"]["lora"]["target_modules"] == ["all-linear"]
    for key, why in (("use_dora", "DoRA"), ("use_rslora", "alpha / rank"),
                     ("lora_modules_to_save", "trains only the adapters"),
                     ("lora_task_type", "CAUSAL_LM")):  # fmt: skip
        (line,) = [u for u in result.unmapped if u.startswith(key + " = ")]
        assert why in line, line
    # Without use_peft TRL trains the full model: the LoRA keys are not used.
    result = import_config("trl", {"lora_r": 8, "max_steps": 10})
    assert "lora" not in result.config["actor"]
    assert "lora_r = 8  (not used with the other settings given)" in result.unmapped


def test_openrlhf_lora_flags_map_and_a_ppo_critic_is_said_to_train_fully() -> None:
    result = import_config(
        "openrlhf",
        {"lora_rank": 8, "lora_dropout": 0.1, "target_modules": ["q_proj", "k_proj"],
         "advantage_estimator": "group_norm", "n_samples_per_prompt": 4, "max_steps": 10},
    )  # fmt: skip
    assert result.config["actor"]["lora"] == {
        "rank": 8, "alpha": 16.0, "dropout": 0.1, "target_modules": ["q_proj", "k_proj"],
    }  # fmt: skip
    assert not any("lora" in u or "target_modules" in u for u in result.unmapped)
    resolve_run_config(None, result.config)
    # OpenRLHF gives the critic the same adapters; hfsdk refuses LoRA on the critic.
    ppo = import_config("openrlhf", {"lora_rank": 8, "max_steps": 10})
    assert ppo.config["actor"]["lora"]["rank"] == 8 and "lora" not in ppo.config["critic"]
    assert any("critic" in w and "LoRA" in w for w in ppo.warnings)
    resolve_run_config(None, ppo.config)
    off = import_config("openrlhf", {"lora_rank": 0, "lora_alpha": 32, "max_steps": 10})
    assert "lora" not in off.config["actor"]
    assert not any(u.startswith("lora") for u in off.unmapped)
