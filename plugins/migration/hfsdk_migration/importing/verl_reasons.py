"""The verl keys hfsdk does not map, each with the reason a user reads.

:func:`list_leftovers` runs after the mappers: a key still unread gets the
reason of the first rule it matches (a section whose switch is off is taken
whole, without a line), and switches at their off value (``false``, ``0``,
``{}``, ``[]``, ``""``) have nothing to map and are not listed.
"""

from __future__ import annotations

import re

from hfsdk_migration.importing.mapper import Mapper

SELF = "hfsdk decides this itself"
PERF = f"{SELF} (an engine performance setting)"
SECTIONS_OFF = {
    "reward_model.": "reward_model.enable",
    "actor_rollout_ref.rollout.multi_turn.": "actor_rollout_ref.rollout.multi_turn.enable",
    "actor_rollout_ref.model.mtp.": "actor_rollout_ref.model.mtp.enable",
    "actor_rollout_ref.rollout.mtp.": "actor_rollout_ref.rollout.mtp.enable",
    "actor_rollout_ref.rollout.prometheus.": "actor_rollout_ref.rollout.prometheus.enable",
    "algorithm.pf_ppo.": "algorithm.use_pf_ppo",
    "algorithm.rollout_correction.": "algorithm.rollout_correction.rollout_is",
    "transfer_queue.": "transfer_queue.enable",
    "actor_rollout_ref.model.tiled_mlp.": "actor_rollout_ref.model.tiled_mlp.enabled",
    "critic.model.tiled_mlp.": "critic.model.tiled_mlp.enabled",
}
"""Sections that mean nothing while their switch (the value) is off."""
GROUPS = (
    (r"(^|\.)profiler\.|^global_profiler\.", "no counterpart (profiling)"),
    (r"\.checkpoint\.", f"{SELF}: a checkpoint holds everything needed to resume exactly"),
    (r"^reward_manager\.", f"{SELF}: reward.functions are called by the controller"),
    (
        r"^(reward_model|reward)\.reward_kwargs\.",
        "no counterpart: arguments of verl's reward manager (hfsdk calls reward.functions)",
    ),
    (r"^reward_model\.", "hfsdk's reward model is the reward.model section: set it by hand"),
    (r"^ray_kwargs\.", f"{SELF}: Ray is started for the run (trainer.ray_address joins one)"),
    (
        r"\.val_kwargs\.",
        "no counterpart: hfsdk validates trainer.val_n responses with the rollout's settings",
    ),
    (r"\.rollout\.multi_turn\.", "no counterpart in rollout.multi_turn (docs/agents.md)"),
    (r"\.rollout\.(agent|trace|checkpoint_engine|engine_kwargs)\.", PERF),
    (r"\.megatron\.override_\w+\.", PERF),
    (
        r"^algorithm\.rollout_correction\.",
        "no counterpart (rollout importance-sampling correction)",
    ),
)
"""Sections listed as one line each: ``prefix* (N keys)  (reason)``."""
RULES = (
    (r"^trainer\.(default_local_dir|default_hdfs_dir)$",
     "hfsdk names a run by its directory (hfsdk run --run-dir)"),
    (r"^trainer\.(resume_mode|resume_from_path)$", "hfsdk resumes from the run directory"),
    (r"^trainer\.device$", f"{SELF}: trainer.device=auto takes the GPU when there is one"),
    (r"(nccl_timeout|ray_wait_register_center_timeout)$",
     f"{SELF}: trainer.worker_timeout_s bounds worker calls"),
    (r"^trainer\.balance_batch$", f"{SELF}: passes are balanced by micro_batch_tokens"),
    (r"\.(ppo|log_prob)_micro_batch_size$",
     "verl's global micro-batch (older verl): set <role>.micro_batch_size (log_prob: "
     "forward_micro_batch_size) to it ÷ the GPU count, hfsdk's are per GPU"),
    (r"use_torch_compile$",
     "not carried over: hfsdk's actor.compile (fsdp) is off by default; set it by hand "
     "for long runs (docs/benchmarks.md, torch.compile)"),
    (r"(use_fused_kernels|use_liger|entropy_from_logits_with_chunking|"
     r"entropy_checkpointing|fused_kernel_options\.\w+|use_mbridge|vanilla_mbridge|"
     r"use_distributed_optimizer|forward_prefetch|wrap_policy\.\w+|use_orig_params)$", PERF),
    (r"\.rollout\.layered_summon$",
     f"{SELF}: a LoRA actor's merged weights reach the rollout one FSDP unit at a time"),
    (r"\.rollout\.(mode|load_format|enable_chunked_prefill|"
     r"enable_prefix_caching|max_num_batched_tokens|max_model_len|cudagraph_capture_sizes|"
     r"disable_log_stats|skip_tokenizer_init|logprobs_mode|scheduling_policy|"
     r"multi_stage_wake_up|skip_dump_dir)$", PERF),
    (r"(data_loader_seed|fsdp_config\.seed|megatron\.seed)$",
     f"{SELF}: trainer.seed seeds the run"),
    (r"model_dtype$", f"{SELF}: trained roles keep float32 master weights"),
    (r"^data\.(dataloader_num_workers|filter_overlong_prompts_workers)$", SELF),
    (r"^data\.val_batch_size$", f"{SELF}: validation takes the whole val set as one batch"),
    (r"\.rollout\.(gpu_memory_utilization|free_cache_engine|max_num_seqs|enforce_eager|dtype)$",
     "applies to the vllm rollout (rollout.name=vllm)"),
    (r"forward_only$|use_legacy_worker_impl$", SELF),
    (r"(trust_remote_code|external_lib|custom_chat_template|hf_config_path|use_shm)$",
     "no counterpart: hfsdk loads local HF model directories as they are"),
    (r"^critic\.loss_agg_mode$", f"{SELF}: algorithm.loss_agg_mode is used for every loss"),
    (r"\.policy_loss\.(clip_cov_\w+|kl_cov_ratio|ppo_kl_coef)$|\.tau_(pos|neg)$",
     "applies to a policy loss hfsdk does not have"),
    (r"(^|\.)rollout_n$|\.hybrid_engine$|\.load_weight$", f"{SELF}: always true in hfsdk"),
    (r"\.optim\.(total_training_steps|num_cycles|lr_warmup_init|min_lr|weight_decay_incr_style|"
     r"lr_wsd_decay_\w+|lr_decay_steps|use_checkpoint_opt_param_scheduler|warmup_style)$",
     "no counterpart (hfsdk schedules: constant or cosine with warmup_steps, min_lr_ratio)"),
)  # fmt: skip
"""One reason per key (the first pattern that matches)."""
DEFAULT = "no hfsdk counterpart"
_OFF = (False, 0, "", "none", "disabled")


def _is_off(value: object) -> bool:
    if isinstance(value, (dict, list)):
        return not value
    return any(value is off or (value == off and type(value) is type(off)) for off in _OFF)


def list_leftovers(m: Mapper) -> None:
    """Give every key the mappers left unread its reason (or take it as off)."""
    m.consume("hydra.")  # Hydra's own settings (search path, run dir), not the run's
    for prefix, switch in SECTIONS_OFF.items():
        if prefix.startswith("reward_model.") and m.flat.get(switch):
            continue
        if prefix == "reward_model." and not m.flat.get(switch):
            _consume_reward_model(m)
        elif not m.flat.get(switch):
            m.consume(prefix)
    if m.flat.get("actor_rollout_ref.model.lora_rank") == 0:
        # LoRA's settings in other sections (the roles' are map_lora's, listed with reasons).
        for key in m.flat:
            if key not in m.reasons and re.search(
                r"\.(lora\w*|target_modules|exclude_modules)(\.|$)", key
            ):
                m.used.add(key)
    for pattern, reason in GROUPS:
        found = {_prefix(pattern, key) for key in m.flat if _open(m, key)}
        prefixes = sorted((p for p in found if p), key=len)
        for text in prefixes:
            if not any(text.startswith(p) and text != p for p in prefixes):
                m.group(text, reason)
    for key, value in m.flat.items():
        if not _open(m, key) or value is None:
            continue
        same = key.endswith("fsdp_config.strategy") or key == "custom_reward_function.name"
        if _is_off(value) or same or (key.endswith("max_samples") and value == -1):
            m.used.add(key)
            continue
        reason = next((r for p, r in RULES if re.search(p, key)), DEFAULT)
        m.reject(key, reason)


def _consume_reward_model(m: Mapper) -> None:
    """Take the off reward model's keys, not the reward manager's that share its section.

    verl (before 0.9) keeps ``reward_manager`` and ``reward_kwargs`` under ``reward_model.``
    and uses them with the model off too: a manager other than ``naive`` (hfsdk calls each
    function per sample, as naive does) and its arguments are listed, not dropped.
    """
    manager = "reward_model.reward_manager"
    for key in m.keys("reward_model."):
        if key.startswith("reward_model.reward_kwargs."):
            continue
        if key == manager and m.flat[key] not in (None, "naive"):
            if key not in m.used:
                m.reject(
                    key,
                    f"no counterpart for verl's {m.flat[key]!r} reward manager: hfsdk calls "
                    "reward.functions per sample, as the naive one does",
                )
            continue
        m.used.add(key)


def _prefix(pattern: str, key: str) -> str | None:
    """The section prefix of ``key`` matched by ``pattern`` (up to and including its dot)."""
    found = re.search(pattern, key)
    return None if found is None else key[: found.end()]


def _open(m: Mapper, key: str) -> bool:
    """Whether ``key`` is still unread and has no reason yet."""
    return (
        key not in m.used
        and key not in m.reasons
        and not key.endswith("_target_")
        and key != "defaults"
        and not key.startswith("defaults.")
    )
