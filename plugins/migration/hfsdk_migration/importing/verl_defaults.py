"""verl's defaults for the keys hfsdk maps, for composing without verl's config directory.

A verl YAML with a ``defaults:`` list, or a launch script of overrides, means
"verl's composed ``ppo_trainer`` (or ``ppo_megatron_trainer``) plus these
changes". With verl's ``trainer/config`` directory at hand (``--verl-config-dir``
or an installed verl) Hydra composes the
real tree; without it this module supplies verl's default value of every key
the importer maps (verl 0.9's values), so the result means what it means in
verl. Keys hfsdk has no counterpart for are left out: they would only be listed.
"""

from __future__ import annotations

from typing import Any

_OPTIM = {
    "lr": 1e-6,
    "lr_warmup_steps": -1,
    "lr_warmup_steps_ratio": 0.0,
    "weight_decay": 0.01,
    "betas": [0.9, 0.999],
    "min_lr_ratio": 0.0,
    "lr_scheduler_type": "constant",
}
_ACTOR = {
    "optim": _OPTIM,
    "ppo_mini_batch_size": 256,
    "ppo_micro_batch_size_per_gpu": None,
    "use_dynamic_bsz": False,
    "ppo_max_token_len_per_gpu": 16384,
    "clip_ratio": 0.2,
    "clip_ratio_low": 0.2,
    "clip_ratio_high": 0.2,
    "clip_ratio_c": 3.0,
    "policy_loss": {"loss_mode": "vanilla"},
    "loss_agg_mode": "token-mean",
    "entropy_coeff": 0,
    "use_kl_loss": False,
    "kl_loss_coef": 0.001,
    "kl_loss_type": "low_var_kl",
    "ppo_epochs": 1,
    "shuffle": False,
    "grad_clip": 1.0,
}
_FSDP = {"param_offload": False, "optimizer_offload": False}
_MEGATRON = {
    "param_offload": False,
    "grad_offload": False,
    "optimizer_offload": False,
    "tensor_model_parallel_size": 1,
    "pipeline_model_parallel_size": 1,
    "sequence_parallel": True,
}
COMMON: dict[str, Any] = {
    "data": {
        "train_files": "~/data/rlhf/gsm8k/train.parquet",
        "val_files": "~/data/rlhf/gsm8k/test.parquet",
        "prompt_key": "prompt",
        "max_prompt_length": 512,
        "max_response_length": 512,
        "train_batch_size": 1024,
        "shuffle": True,
        "filter_overlong_prompts": False,
    },
    "actor_rollout_ref": {
        "model": {"path": "~/models/deepseek-llm-7b-chat", "enable_gradient_checkpointing": True},
        "actor": _ACTOR,
        "ref": {"log_prob_micro_batch_size_per_gpu": None},
        "rollout": {
            "name": "???",
            "temperature": 1.0,
            "top_k": -1,
            "top_p": 1,
            "prompt_length": "${oc.select:data.max_prompt_length,512}",
            "response_length": "${oc.select:data.max_response_length,512}",
            "dtype": "bfloat16",
            "gpu_memory_utilization": 0.5,
            "free_cache_engine": True,
            "tensor_model_parallel_size": 2,
            "max_num_seqs": 256,
            "log_prob_micro_batch_size_per_gpu": None,
            "n": 1,
        },
    },
    "critic": {
        "optim": {**_OPTIM, "lr": 1e-5},
        "model": {"path": "~/models/deepseek-llm-7b-chat", "enable_gradient_checkpointing": True},
        "ppo_mini_batch_size": "${oc.select:actor_rollout_ref.actor.ppo_mini_batch_size,256}",
        "ppo_micro_batch_size_per_gpu": None,
        "ppo_epochs": "${oc.select:actor_rollout_ref.actor.ppo_epochs,1}",
        "cliprange_value": 0.5,
    },
    "algorithm": {
        "gamma": 1.0,
        "lam": 1.0,
        "adv_estimator": "gae",
        "norm_adv_by_std_in_grpo": True,
        "use_kl_in_reward": False,
        "kl_penalty": "kl",
        "kl_ctrl": {"type": "fixed", "kl_coef": 0.001, "horizon": 10000, "target_kl": 0.1},
    },
    "custom_reward_function": {"path": None, "name": "compute_score"},
    "trainer": {
        "total_epochs": 30,
        "total_training_steps": None,
        "logger": ["console", "wandb"],
        "nnodes": 1,
        "n_gpus_per_node": 8,
        "save_freq": -1,
        "test_freq": -1,
    },
}
STRATEGY: dict[str, dict[str, Any]] = {
    "ppo_trainer": {
        "actor_rollout_ref": {
            "actor": {"strategy": "fsdp", "fsdp_config": _FSDP},
            "ref": {"strategy": "fsdp", "fsdp_config": {"param_offload": False}},
        },
        "critic": {"strategy": "fsdp", "model": {"fsdp_config": _FSDP}},
    },
    "ppo_megatron_trainer": {
        "actor_rollout_ref": {
            "actor": {"strategy": "megatron", "megatron": _MEGATRON},
            "ref": {"strategy": "megatron", "megatron": _MEGATRON},
        },
        "critic": {"strategy": "megatron", "megatron": _MEGATRON},
    },
}
"""What each of verl's two trainer configs sets differently: the training strategy."""


def default_tree(config_name: str = "ppo_trainer") -> dict[str, Any]:
    """verl's defaults (mapped keys only) for ``ppo_trainer`` or ``ppo_megatron_trainer``."""
    name = config_name.removesuffix(".yaml").rpartition("/")[2]
    if name not in STRATEGY:
        name = "ppo_megatron_trainer" if "megatron" in name else "ppo_trainer"
    from omegaconf import OmegaConf

    merged = OmegaConf.merge(OmegaConf.create(COMMON), OmegaConf.create(STRATEGY[name]))
    return OmegaConf.to_container(merged, resolve=False)  # type: ignore[return-value]
