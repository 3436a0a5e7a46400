"""OpenRLHF's ``openrlhf.cli.train_ppo_ray`` flags (read from its launch command line).

Batch sizes: ``--rollout_batch_size`` is prompts per step, ``--train_batch_size``
samples per optimizer step (global), ``--micro_train_batch_size`` samples per
pass on one device. For the flags whose OpenRLHF default differs from
hfsdk's, OpenRLHF's default is assumed and listed in the output's header.
"""

from __future__ import annotations

import math
from typing import Any

from hfsdk import LOGGERS, ConfigError
from hfsdk_migration.importing.mapper import LORA_REGEX, Mapper, lora_targets

ESTIMATORS = {
    "gae": ("gae", "ppo"),
    "reinforce": ("reinforce_plus_plus", "grpo"),
    "reinforce_baseline": ("reinforce_plus_plus_baseline", "grpo"),
    "rloo": ("rloo", "grpo"),
    "group_norm": ("grpo", "grpo"),
    "dr_grpo": ("grpo", "grpo"),
}
"""OpenRLHF's ``--advantage_estimator`` -> (hfsdk estimator, algorithm)."""
SELF = "hfsdk decides this itself"
REASONS = {
    "zero_stage": f"{SELF}: FSDP2 shards weights, gradients and optimizer state (ZeRO-3)",
    "adam_offload": "no counterpart: hfsdk keeps optimizer state on the device",
    "flash_attn": f"{SELF} (actor.attn_implementation=auto)",
    "colocate_all_models": f"{SELF}: roles share placement.pools (fused by default)",
    "save_path": "hfsdk names a run by its directory (hfsdk run --run-dir)",
    "ckpt_path": "hfsdk keeps checkpoints in the run directory",
    "max_ckpt_num": "no counterpart",
    "logging_steps": f"{SELF}: every step is logged",
    "reward_pretrain": "hfsdk's reward model is the reward.model section: set it by hand",
    "num_episodes": "hfsdk counts steps: set trainer.total_steps",
}

UNMAPPED = frozenset(
    [
        "ref_num_nodes",
        "ref_num_gpus_per_node",
        "reward_num_nodes",
        "reward_num_gpus_per_node",
        "critic_num_nodes",
        "critic_num_gpus_per_node",
        "vllm_sync_backend",
        "vllm_sync_with_ray",
        "enable_prefix_caching",
        "vllm_generate_batch_size",
        "async_train",
        "colocate_actor_ref",
        "colocate_critic_reward",
        "deepspeed_enable_sleep",
        "ds_tensor_parallel_size",
        "full_determinism",
        "packing_samples",
        "use_dynamic_batch",
        "max_tokens_per_gpu",
        "ring_attn_size",
        "ring_head_stride",
        "local_rank",
        "zpg",
        "grad_accum_dtype",
        "disable_trace_cache",
        "load_checkpoint",
        "use_ds_universal_ckpt",
        "disable_ds_ckpt",
        "save_hf_ckpt",
        "max_ckpt_mem",
        "eval_temperature",
        "eval_n_samples_per_prompt",
        "max_samples",
        "max_len",
        "prompt_split",
        "eval_split",
        "output_key",
        "prompt_data_probs",
        "eval_dataset_probs",
        "overlong_buffer_len",
        "overlong_penalty_factor",
        "dynamic_filtering",
        "dynamic_filtering_reward_range",
        "advantages_norm",
        "reward_clip_range",
        "ptx_coef",
        "pretrain_data",
        "freezing_actor_steps",
        "normalize_reward",
        "value_head_prefix",
        "ref_reward_offload",
        "load_in_4bit",
        "use_liger_kernel",
        "wandb_group",
        "perf",
        "use_ms",
        "critic_lr_head_ratio",
        "save_value_network",
        "enforce_eager_mode",
        "agent_func_path",
        "remote_rm_batch_size",
        "vllm_max_num_seqs",
    ]
)
"""Real ``train_ppo_ray`` flags with no hfsdk counterpart (listed as such); any other flag
the importer does not read is a typo when close to one it does."""
CONDITIONAL = frozenset(
    [
        "critic_pretrain",
        "critic_learning_rate",
        "gamma",
        "lambd",
        "value_clip",
        "kl_target",
        "kl_horizon",
        "vllm_gpu_memory_utilization",
        "vllm_enable_sleep",
        "enforce_eager",
        "wandb_project",
        "wandb_org",
        "wandb_run_name",
        "label_key",
    ]
)
"""Flags read only with another flag (``--vllm_num_engines``, ``--use_wandb``, PPO's critic)."""
UNKNOWN = "unknown to this importer (an openrlhf.cli.train_ppo_ray flag?)"


def _role_batches(m: Mapper, role: str) -> None:
    m.put(f"{role}.micro_batch_size", m.int("micro_train_batch_size", 8, source_default=True))
    m.put(f"{role}.mini_batch_size", m.int("train_batch_size", 128, source_default=True))
    if m.has("micro_rollout_batch_size"):
        m.put(f"{role}.forward_micro_batch_size", m.int("micro_rollout_batch_size"))
    m.put(f"{role}.ppo_epochs", m.int("max_epochs", 1))


def _kl(m: Mapper) -> None:
    coef = m.num("init_kl_coef", 0.01, source_default=True)
    estimator = m.get("kl_estimator", "k1")
    if estimator in ("k1", "k2", "k3"):
        m.put("algorithm.kl_estimator", estimator)
    else:
        m.reject("kl_estimator", "hfsdk KL estimators: k1, k2, k3, low_var_kl, abs")
    if m.get("use_kl_loss"):
        m.put("algorithm.kl_in_reward", False)
        m.put("algorithm.kl_loss_coef", coef)
        m.put("algorithm.kl_coef", 0.0)
        return
    m.put("algorithm.kl_in_reward", True)
    m.put("algorithm.kl_loss_coef", 0.0)
    m.put("algorithm.kl_coef", coef)
    if m.has("kl_target"):
        m.put("algorithm.kl_controller", "adaptive")
        m.put("algorithm.target_kl", m.num("kl_target"))
    if m.has("kl_horizon"):
        m.put("algorithm.kl_horizon", m.int("kl_horizon"))


def _optim(m: Mapper, role: str, flag: str, default: float) -> None:
    m.put(f"{role}.optim.lr", m.num(flag, default, source_default=True))
    if m.has("l2"):
        m.put(f"{role}.optim.weight_decay", m.num("l2"))
    # get_optimizer_grouped_parameters leaves biases and norm weights undecayed.
    m.put(f"{role}.optim.decay_norms_and_biases", False)
    if m.has("max_norm"):
        m.put(f"{role}.optim.grad_clip", m.num("max_norm"))
    # train_ppo_ray's own default, not hfsdk's (0.9, 0.999).
    m.put(f"{role}.optim.betas", m.numbers("adam_betas", 2, [0.9, 0.95], source_default=True))
    _schedule(m, role)


def _schedule(m: Mapper, role: str) -> None:
    """``--lr_scheduler`` and ``--lr_warmup_ratio``, with train_ppo_ray's defaults."""
    scheduler = m.get("lr_scheduler", "cosine_with_min_lr", source_default=True)
    if scheduler == "cosine_with_min_lr":
        # train_ppo_ray passes min_lr = 0.1 x the learning rate to it.
        m.put(f"{role}.optim.lr_schedule", "cosine")
        m.put(f"{role}.optim.min_lr_ratio", 0.1)
    elif scheduler in ("cosine", "constant_with_warmup"):
        m.put(f"{role}.optim.lr_schedule", scheduler.removesuffix("_with_warmup"))
    else:
        m.reject("lr_scheduler", "hfsdk schedules: constant (with warmup), cosine")
    ratio = m.num("lr_warmup_ratio", 0.03)
    total = m.int("max_steps")
    if total is not None and total > 0:
        # A ratio of the whole run, so the same in OpenRLHF's optimizer steps and hfsdk's
        # training steps; OpenRLHF rounds it up too.
        m.get("lr_warmup_ratio", 0.03, source_default=True)
        m.put(f"{role}.optim.warmup_steps", math.ceil(ratio * total))
        return
    reason = (
        f"needs the total steps; set actor.optim.warmup_steps (and the critic's) = "
        f"ceil({ratio:g} x trainer.total_steps)"
    )
    if m.has("lr_warmup_ratio"):
        m.reject("lr_warmup_ratio", reason)
    else:
        m.reject_default("lr_warmup_ratio", 0.03, reason)


def _files(value: Any) -> list[str]:
    return [v for v in str(value).split(",") if v]


def _data_and_rollout(m: Mapper) -> None:
    if m.has("prompt_data"):
        m.put("data.train_files", _files(m.get("prompt_data")))
    if m.has("eval_dataset"):
        m.put("data.val_files", _files(m.get("eval_dataset")))
    if m.has("input_key"):
        m.put("data.prompt_key", str(m.get("input_key")))
    # Without --apply_chat_template OpenRLHF tokenizes the input_key text as written;
    # hfsdk's unset (null) would apply the tokenizer's template when it has one.
    chat = bool(m.get("apply_chat_template"))
    m.put("data.apply_chat_template", chat)
    reason = (
        "OpenRLHF ignores it with --apply_chat_template"
        if chat
        else "no hfsdk counterpart: write the template into the prompt column "
        "(e.g. datasets' map) before training"
    )
    # A template such as "User: {}" reads as a YAML mapping on the command line, which
    # flattens to input_template.<word> keys: each is the same flag.
    for key in m.keys("input_template."):
        m.reject(key, reason)
    m.put("data.batch_size", m.int("rollout_batch_size", 1024, source_default=True))
    length = m.int("prompt_max_len", 1024, source_default=True)
    m.put("data.max_prompt_length", length)  # the rollout's follows from it
    # OpenRLHF's tokenize_fn truncates to the limit; hfsdk's prompt dataset never truncates.
    m.note(
        f"OpenRLHF truncates prompts over --prompt_max_len={length} tokens; hfsdk drops them "
        "instead: check how many with `hfsdk data inspect FILE --config run.yaml`"
    )
    m.put("rollout.max_response_length", m.int("generate_max_len", 1024, source_default=True))
    for key in ("temperature", "top_p"):
        if m.has(key):
            m.put(f"rollout.{key}", m.num(key))
    if m.has("vllm_num_engines") and m.int("vllm_num_engines") > 0:  # 0: no vLLM
        m.put("rollout.backend", "vllm")
        if m.has("vllm_gpu_memory_utilization"):
            m.put("rollout.gpu_memory_utilization", m.num("vllm_gpu_memory_utilization"))
        if m.get("vllm_enable_sleep"):
            m.put("rollout.sleep", "on")
        if m.has("enforce_eager"):
            m.put("rollout.enforce_eager", bool(m.get("enforce_eager")))
    if m.has("vllm_tensor_parallel_size"):
        tp = m.int("vllm_tensor_parallel_size")
        if tp < 1:
            raise ConfigError(
                f"vllm_tensor_parallel_size={tp} is not valid; OpenRLHF expects an integer >= 1: "
                "set --vllm_tensor_parallel_size to 1 or more"
            )
        m.put("actor.rollout_layout.tp", tp)


def _reward(m: Mapper) -> None:
    url = m.get("remote_rm_url")
    if url is None:
        return
    if str(url).endswith(".py"):
        function: dict[str, Any] = {"name": f"{url}:reward_func", "style": "openrlhf"}
        if m.has("label_key"):
            function["kwargs"] = {"label_key": str(m.get("label_key"))}
        m.put("reward.functions", [function])
    else:
        m.reject("remote_rm_url", "a reward server: give a local reward_func.py instead")


def _trainer(m: Mapper) -> None:
    if m.has("max_steps"):
        m.put("trainer.total_steps", m.int("max_steps"))
    if m.has("seed"):
        m.put("trainer.seed", m.int("seed"))
    for src, dest in (("save_steps", "save_every"), ("eval_steps", "val_every")):
        if m.has(src):
            m.put(f"trainer.{dest}", max(m.int(src), 0))
    loggers = ["console"]
    if m.get("use_wandb"):
        loggers.append("wandb")
        # OpenRLHF's use_wandb is the API key (or True); the key stays in WANDB_API_KEY.
        for src, dest in (("wandb_project", "project"), ("wandb_org", "entity"),
                          ("wandb_run_name", "name")):  # fmt: skip
            if m.has(src):
                m.put(f"wandb.{dest}", str(m.get(src)))
    if m.get("use_tensorboard"):
        loggers.append("tensorboard")
    if len(loggers) > 1:
        m.put("trainer.loggers", [name for name in loggers if name in LOGGERS] + ["jsonl"])
    nodes, gpus = m.int("actor_num_nodes"), m.int("actor_num_gpus_per_node")
    if nodes is not None or gpus is not None:
        # An hfsdk pool counts its devices in total, spread over its nodes.
        pool = {"devices": (gpus or 1) * (nodes or 1), "nodes": nodes or 1}
        m.put("placement.pools", {"global": pool})
    for role in ("ref", "critic", "reward"):
        for suffix in ("_num_nodes", "_num_gpus_per_node"):
            if m.has(role + suffix):
                m.reject(role + suffix, f"{SELF}: roles share placement.pools")


def _clip_range(m: Mapper) -> tuple[float, float]:
    """``--eps_clip_low_high LOW HIGH``, else ``--eps_clip`` on both sides.

    OpenRLHF's argparse takes exactly two values; anything else (one value, a
    string from a JSON file) would not run there, so it is listed as not mapped
    rather than guessed at, and ``--eps_clip`` applies.
    """
    clip = m.get("eps_clip_low_high")
    if isinstance(clip, list) and len(clip) == 2:
        low, high = m.numbers("eps_clip_low_high", 2)
        return low, high
    if clip is not None:
        m.reject(
            "eps_clip_low_high",
            "OpenRLHF takes two values, LOW HIGH; eps_clip is used for both sides instead",
        )
    eps = m.num("eps_clip", 0.2)
    return eps, eps


POLICY_LOSSES = {"ppo": "ppo_clip", "gspo": "gspo"}
"""OpenRLHF's ``--policy_loss_type`` -> hfsdk's ``algorithm.policy_loss``."""
WHITENED = ("gae", "reinforce", "reinforce_baseline")
"""OpenRLHF estimators whose advantages are whitened over the batch (where
``--no_advantage_std_norm`` keeps only the mean subtraction)."""


def _policy_loss(m: Mapper) -> str:
    """``--policy_loss_type``: ``gspo`` -> ``algorithm.policy_loss: gspo``, ``ppo`` the default."""
    loss = m.get("policy_loss_type", "ppo")
    if loss not in POLICY_LOSSES:
        m.reject("policy_loss_type", f"hfsdk counterparts exist for {', '.join(POLICY_LOSSES)}")
        return "ppo_clip"
    if loss != "ppo":  # ppo is hfsdk's default ppo_clip
        m.put("algorithm.policy_loss", POLICY_LOSSES[loss])
    return POLICY_LOSSES[loss]


def _std_norm(m: Mapper, name: str) -> None:
    """``--no_advantage_std_norm``: OpenRLHF then centres the batch's advantages without
    dividing by their std, for the estimators it whitens (it reads the flag for no other).

    hfsdk's gae and reinforce++ estimators either whiten fully or not at all, so the
    flag is listed for them; for the others it changes nothing, in OpenRLHF as in hfsdk.
    """
    if not m.get("no_advantage_std_norm") or name not in WHITENED:
        return
    m.reject(
        "no_advantage_std_norm",
        f"hfsdk's counterpart of {name!r} always divides by the batch std when it whitens; "
        "there is no centre-only option",
    )


def _lora(m: Mapper, chosen: str) -> None:
    """``--lora_rank`` (0, the default: off), ``--lora_alpha``, ``--lora_dropout``,
    ``--target_modules`` -> ``actor.lora``, with train_ppo_ray's defaults (16, 0, all-linear).

    OpenRLHF gives a PPO critic the same adapters; hfsdk has LoRA on the actor only, so
    its critic trains the full model, which a warning says.
    """
    settings = ("lora_alpha", "lora_dropout", "target_modules")
    rank = m.int("lora_rank", 0)
    if rank <= 0:
        for key in settings:
            m.get(key)  # settings of LoRA that is off
        return
    m.put("actor.lora.rank", rank)
    m.put("actor.lora.alpha", m.num("lora_alpha", 16, source_default=True))
    m.put("actor.lora.dropout", m.num("lora_dropout", 0.0))
    value = m.get("target_modules", "all-linear", source_default=True)
    targets = lora_targets("target_modules", value)
    if targets is None:
        m.reject("target_modules", LORA_REGEX)
    else:
        m.put("actor.lora.target_modules", targets)
    if chosen in ("ppo", "safe_rlhf"):
        m.note(
            f"OpenRLHF puts --lora_rank {rank} adapters on the critic too; hfsdk has LoRA on "
            "the actor only, so its critic trains the full model (more memory, other updates)"
        )


def import_openrlhf(m: Mapper, algo: str | None) -> str:
    """Map OpenRLHF flags from ``m`` into hfsdk keys; returns the hfsdk algorithm chosen."""
    m.flags = True  # OpenRLHF's keys are its --flags: a bare one is refused naming --key
    name = m.get("advantage_estimator", "gae", source_default=True)
    estimator, default_algo = ESTIMATORS.get(name, ("grpo", "grpo"))
    if name not in ESTIMATORS:
        m.reject("advantage_estimator", f"hfsdk counterparts exist for {', '.join(ESTIMATORS)}")
    chosen = algo or default_algo
    m.put("algo", chosen)
    m.put("algorithm.advantage_estimator", estimator)
    if name == "dr_grpo":
        m.put("algorithm.loss_agg_mode", "seq-mean-token-sum-norm")
        m.put("advantage.norm_by_std", False)
    m.put("algorithm.n_samples_per_prompt", m.int("n_samples_per_prompt", 1))
    if m.has("pretrain"):
        m.put("actor.model_path", str(m.get("pretrain")))
    if m.get("gradient_checkpointing"):
        m.put("actor.gradient_checkpointing", True)
    if m.get("bf16"):
        m.put("actor.dtype", "bfloat16")
    _optim(m, "actor", "actor_learning_rate", 1e-6)
    _lora(m, chosen)
    _role_batches(m, "actor")
    low, high = _clip_range(m)
    m.put("policy_loss.clip_ratio_low", low)
    m.put("policy_loss.clip_ratio_high", high)
    if _policy_loss(m) == "gspo":
        if m.has("dual_clip"):
            m.reject("dual_clip", "hfsdk's gspo loss has no dual clip")
    else:
        # OpenRLHF's PolicyLoss bounds negative advantages only with --dual_clip; hfsdk's
        # ppo_clip does by default (c = 3), so null turns it off.
        m.put("policy_loss.clip_ratio_c", m.num("dual_clip") if m.has("dual_clip") else None)
    _std_norm(m, name)
    if m.has("entropy_loss_coef"):
        m.put("algorithm.entropy_coef", m.num("entropy_loss_coef"))
    _kl(m)
    if chosen in ("ppo", "safe_rlhf"):
        if m.has("critic_pretrain"):
            m.put("critic.model_path", str(m.get("critic_pretrain")))
        _optim(m, "critic", "critic_learning_rate", 9e-6)
        _role_batches(m, "critic")
        m.put("advantage.gamma", m.num("gamma", 1.0))
        m.put("advantage.lam", m.num("lambd", 1.0))
        m.put("value_loss.clip_range_value", m.num("value_clip", 0.5, source_default=True))
    _data_and_rollout(m)
    _reward(m)
    _trainer(m)
    for key, reason in REASONS.items():
        m.reject(key, reason)
    m.check_unknown("OpenRLHF", UNMAPPED, CONDITIONAL, UNKNOWN)
    return chosen
