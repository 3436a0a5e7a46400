"""TRL's ``GRPOConfig`` and ``PPOConfig`` (flat keys: YAML, JSON or a ``TrlParser`` command line).

Batch sizes are per process (the launcher's process count multiplies them):
``per_device_train_batch_size`` is the micro-batch, ``× gradient_accumulation_steps``
the responses of one optimizer step, and for GRPO the generation batch
(``generation_batch_size``, else ``per_device_train_batch_size ×
steps_per_generation``) divided by ``num_generations`` the prompts per step.
For the keys whose TRL default differs from hfsdk's, TRL's default is assumed
and listed in the output's header.
"""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction
from typing import Any

from hfsdk import LOGGERS, ConfigError
from hfsdk_migration.importing.mapper import LORA_REGEX, Mapper, as_int, lora_targets

PPO_ONLY = ("num_ppo_epochs", "cliprange", "cliprange_value", "vf_coef", "kl_coef", "lam")
"""Keys only ``PPOConfig`` has: their presence selects PPO."""
DPO_ONLY = (
    "rpo_alpha",
    "label_smoothing",
    "precompute_ref_log_probs",
    "reference_free",
    "f_divergence_type",
    "use_weighting",
    "ld_alpha",
    "loss_weights",
)
"""Keys only TRL's ``DPOConfig`` has: their presence shows a DPO config."""
DPO_LOSS_TYPES = frozenset(
    ["sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard",
     "aot", "aot_pair", "discopop", "apo_zero", "apo_down", "sft", "alphapo"]
)  # fmt: skip
"""DPOConfig's ``loss_type`` values (GRPOConfig's are grpo, bnpo, dapo, dr_grpo)."""
LOSS_TYPES = {
    "grpo": "seq-mean-token-mean",
    "bnpo": "token-mean",
    "dapo": "token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
}
"""TRL's ``loss_type`` -> hfsdk's ``algorithm.loss_agg_mode``."""
IS_MODES = {
    "token_truncate": ("tis", "token"),
    "sequence_truncate": ("tis", "sequence"),
    "token_mask": ("mis", "token"),
    "sequence_mask": ("mis", "sequence"),
}
"""TRL's ``vllm_importance_sampling_mode`` -> (hfsdk rollout correction, its level)."""
PEFT_KEYS = (
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "lora_target_modules",
    "lora_target_parameters",
    "lora_modules_to_save",
    "lora_task_type",
    "use_rslora",
    "use_dora",
)
"""TRL ``ModelConfig``'s LoRA keys, read by ``get_peft_config`` only with ``use_peft``."""
PEFT_DEFAULT_TARGETS = ["q_proj", "v_proj"]
"""peft's targets when ``target_modules`` is unset, for Llama, Qwen2, Mistral and Gemma."""
PEFT_LACKS = {
    "use_rslora": "hfsdk scales adapters by alpha / rank; rsLoRA's alpha / sqrt(rank) has no "
    "counterpart",
    "use_dora": "hfsdk has no DoRA (weight-decomposed adapters), only plain LoRA",
    "lora_modules_to_save": "hfsdk trains only the adapters; it has no fully trained modules "
    "beside them",
    "lora_target_parameters": "hfsdk adapts Linear modules only, not parameters",
}
"""TRL LoRA settings hfsdk's ``actor.lora`` lacks, listed when on (set and not off)."""
UNMAPPED = frozenset(
    [
        "output_dir",
        "num_generations_eval",
        "overwrite_output_dir",
        "do_train",
        "do_eval",
        "do_predict",
        "prediction_loss_only",
        "per_device_eval_batch_size",
        "per_gpu_train_batch_size",
        "per_gpu_eval_batch_size",
        "eval_accumulation_steps",
        "eval_delay",
        "torch_empty_cache_steps",
        "lr_scheduler_kwargs",
        "log_level",
        "log_level_replica",
        "log_on_each_node",
        "logging_dir",
        "logging_strategy",
        "logging_first_step",
        "logging_steps",
        "logging_nan_inf_filter",
        "save_total_limit",
        "save_safetensors",
        "save_on_each_node",
        "save_only_model",
        "restore_callback_states_from_checkpoint",
        "no_cuda",
        "use_cpu",
        "use_mps_device",
        "data_seed",
        "jit_mode_eval",
        "use_ipex",
        "fp16",
        "fp16_opt_level",
        "half_precision_backend",
        "bf16_full_eval",
        "fp16_full_eval",
        "tf32",
        "local_rank",
        "ddp_backend",
        "tpu_num_cores",
        "dataloader_drop_last",
        "dataloader_num_workers",
        "dataloader_prefetch_factor",
        "past_index",
        "run_name",
        "disable_tqdm",
        "remove_unused_columns",
        "label_names",
        "load_best_model_at_end",
        "metric_for_best_model",
        "greater_is_better",
        "ignore_data_skip",
        "fsdp",
        "fsdp_config",
        "fsdp_min_num_params",
        "fsdp_transformer_layer_cls_to_wrap",
        "accelerator_config",
        "deepspeed",
        "label_smoothing_factor",
        "optim",
        "optim_args",
        "adafactor",
        "group_by_length",
        "length_column_name",
        "ddp_find_unused_parameters",
        "ddp_bucket_cap_mb",
        "ddp_broadcast_buffers",
        "dataloader_pin_memory",
        "dataloader_persistent_workers",
        "skip_memory_metrics",
        "use_legacy_prediction_loop",
        "push_to_hub",
        "resume_from_checkpoint",
        "hub_model_id",
        "hub_strategy",
        "hub_token",
        "hub_private_repo",
        "hub_always_push",
        "hub_revision",
        "gradient_checkpointing_kwargs",
        "include_inputs_for_metrics",
        "include_for_metrics",
        "eval_do_concat_batches",
        "auto_find_batch_size",
        "full_determinism",
        "torchdynamo",
        "ray_scope",
        "ddp_timeout",
        "torch_compile",
        "torch_compile_backend",
        "torch_compile_mode",
        "include_tokens_per_second",
        "include_num_input_tokens_seen",
        "neftune_noise_alpha",
        "optim_target_modules",
        "batch_eval_metrics",
        "eval_on_start",
        "use_liger_kernel",
        "eval_use_gather_object",
        "average_tokens_across_devices",
        "logging_dir",
        "parallelism_config",
        "project",
        "trackio_space_id",
        "model_init_kwargs",
        "disable_dropout",
        "cast_lm_head_to_fp32",
        "shuffle_dataset",
        "ds3_gather_for_generation",
        "min_p",
        "repetition_penalty",
        "generation_kwargs",
        "use_transformers_paged",
        "cache_implementation",
        "vllm_server_base_url",
        "vllm_server_host",
        "vllm_server_port",
        "vllm_server_timeout",
        "vllm_model_impl",
        "vllm_guided_decoding_regex",
        "vllm_structured_outputs_regex",
        "delta",
        "reward_weights",
        "mask_truncated_completions",
        "sync_ref_model",
        "ref_model_mixup_alpha",
        "ref_model_sync_steps",
        "top_entropy_quantile",
        "use_liger_loss",
        "log_completions",
        "num_completions_to_print",
        "wandb_log_unique_prompts",
        "log_unique_prompts",
        "chat_template_kwargs",
        "model_revision",
        "torch_dtype",
        "dtype",
        "trust_remote_code",
        "attn_implementation",
        "load_in_8bit",
        "load_in_4bit",
        "bnb_4bit_quant_type",
        "use_bnb_nested_quant",
        "dataset_name",
        "dataset_config",
        "dataset_train_split",
        "dataset_test_split",
        "dataset_streaming",
        "gradient_checkpointing_use_reentrant",
        "ignore_bias_buffers",
        "reward_model_name_or_path",
        "reward_funcs",
        "config_file",
        "exp_name",
        "reward_model_path",
        "model_adapter_name",
        "ref_adapter_name",
        "whiten_rewards",
        "vf_coef",
        "dataset_num_proc",
        "total_episodes",
        "local_rollout_forward_batch_size",
        "num_sample_generations",
        "stop_token",
        "stop_token_id",
        "missing_eos_penalty",
        "world_size",
        "num_total_batches",
        "micro_batch_size",
        "local_batch_size",
        "batch_size",
        "local_mini_batch_size",
        "mini_batch_size",
    ]
)
"""Real TRL/transformers/accelerate keys the importer has no hfsdk counterpart for (listed
as such); any other key it does not read is a typo when close to one it does."""
CONDITIONAL = frozenset(
    [
        "vllm_mode",
        "vllm_gpu_memory_utilization",
        "vllm_tensor_parallel_size",
        "vllm_enable_sleep_mode",
        "vllm_importance_sampling_correction",
        "vllm_importance_sampling_mode",
        "vllm_importance_sampling_cap",
        "max_tool_calling_iterations",
        "num_mini_batches",
        "num_ppo_epochs",
        "cliprange",
        "cliprange_value",
        "kl_coef",
        "kl_estimator",
        "gamma",
        "lam",
        "response_length",
        "sft_model_path",
        "num_generations",
        "steps_per_generation",
        "generation_batch_size",
        "num_iterations",
        "beta",
        "epsilon",
        "epsilon_high",
        "loss_type",
        "scale_rewards",
        "importance_sampling_level",
        "tools",
        "max_completion_length",
        "warmup_ratio",
        *PEFT_KEYS,
    ]
)
"""Keys read only with another setting (``use_vllm``, ``tools``, the algorithm chosen)."""
UNKNOWN = "unknown to this importer (a TRL GRPOConfig/transformers TrainingArguments key?)"
EPOCHS = "hfsdk counts steps: set trainer.total_steps"
"""Why TRL's epoch count (given, or its 3 by default) is listed rather than mapped."""
RATIO_UNSET = "a ratio of max_steps, which is not set"
"""Why a TRL step count below 1 (transformers' ratio of the run) is listed without max_steps."""
TRUNCATES = (
    "TRL truncates prompts over max_prompt_length={length} tokens; hfsdk drops them instead: "
    "check how many with `hfsdk data inspect FILE --config run.yaml`"
)


DATA_FORMATS = (".jsonl", ".json", ".parquet")
"""The dataset files hfsdk's loader reads (besides ``Dataset.save_to_disk`` directories)."""
LOCAL_DATA = (
    "hfsdk reads .jsonl, .json and .parquet files and Dataset.save_to_disk directories; "
    "convert it and set data.train_files"
)


def _dataset(m: Mapper) -> None:
    """A local ``dataset_name`` -> ``data.train_files``; a hub name stays listed.

    TRL's scripts train on ``load_dataset(dataset_name)[dataset_train_split]`` (default
    ``train``): a local file loads as one ``train`` split, a saved ``DatasetDict``'s split is
    ``DIR/<split>`` to hfsdk; a saved ``Dataset`` (which ``load_dataset`` refuses, a script
    of one's own reads with ``load_from_disk``) is taken whole. Only what hfsdk loads
    offline is mapped, made absolute since
    TRL resolved it from the directory it ran in. A hub name is read without ``m.has`` so
    it keeps its "no hfsdk counterpart" listing.
    """
    name = m.flat.get("dataset_name")
    if not isinstance(name, str) or not os.path.exists(name):
        return
    path = os.path.abspath(name)
    split = m.flat.get("dataset_train_split")
    if os.path.isfile(path):
        if not path.lower().endswith(DATA_FORMATS):
            m.reject("dataset_name", LOCAL_DATA)
            return
        m.put("data.train_files", [path])
        m.get("dataset_name")
        if split in (None, "train"):
            m.get("dataset_train_split")
        else:
            m.reject(
                "dataset_train_split",
                "TRL loads a single file as one split, 'train'; hfsdk trains on the whole file",
            )
        return
    if os.path.isfile(os.path.join(path, "state.json")):  # a saved Dataset: no splits
        m.put("data.train_files", [path])
        m.get("dataset_name")
        return
    splits_file = os.path.join(path, "dataset_dict.json")  # a saved DatasetDict
    if not os.path.isfile(splits_file):
        m.reject(
            "dataset_name",
            "a local directory, not a Dataset.save_to_disk directory; " + LOCAL_DATA,
        )
        return
    try:
        with open(splits_file, encoding="utf-8") as handle:
            splits = [str(split) for split in json.load(handle).get("splits", [])]
    except (OSError, ValueError, AttributeError) as exc:  # listed: an import never stops here
        m.reject("dataset_name", f"its dataset_dict.json is unreadable ({exc}); {LOCAL_DATA}")
        return
    wanted = split or "train"  # TRL's dataset_train_split default
    if wanted not in splits:
        m.reject(
            "dataset_name",
            f"the saved DatasetDict has no split {wanted!r} (splits: {', '.join(splits)}); "
            "set data.train_files to DIR/<split>",
        )
        return
    m.put("data.train_files", [os.path.join(path, wanted)])
    m.get("dataset_name")
    m.get("dataset_train_split")


def _common(m: Mapper, lr_default: float, temperature: float | None) -> None:
    """The keys GRPO and PPO share; ``temperature`` is TRL's default for the algorithm
    (``None``: TRL's equals hfsdk's)."""
    if m.has("model_name_or_path"):  # TRL scripts' ModelConfig, parsed by the same TrlParser
        m.put("actor.model_path", str(m.get("model_name_or_path")))
    _dataset(m)
    m.put(
        "actor.optim.lr",
        m.num("learning_rate", lr_default, source_default=True),
    )
    for src, dest in (
        ("weight_decay", "weight_decay"),
        ("adam_epsilon", "eps"),
        ("max_grad_norm", "grad_clip"),
    ):
        if m.has(src):
            m.put(f"actor.optim.{dest}", m.num(src))
    # transformers' Trainer leaves biases and norm weights undecayed (get_decay_parameter_names).
    m.put("actor.optim.decay_norms_and_biases", False)
    if m.has("adam_beta1") or m.has("adam_beta2"):
        m.put(
            "actor.optim.betas",
            [
                m.num("adam_beta1", 0.9),
                m.num("adam_beta2", 0.999),
            ],
        )
    schedule = m.get("lr_scheduler_type")
    if schedule in ("constant", "constant_with_warmup", "cosine"):
        # hfsdk's constant schedule warms up when warmup_steps is set (see _steps).
        m.put("actor.optim.lr_schedule", schedule.removesuffix("_with_warmup"))
    elif schedule is not None:
        m.reject("lr_scheduler_type", "hfsdk schedules: constant, constant_with_warmup, cosine")
    else:
        m.reject_default(
            "lr_scheduler_type",
            "linear",
            "TRL decays linearly to 0; hfsdk schedules: constant, cosine (set "
            "actor.optim.lr_schedule)",
        )
    if m.has("seed"):
        m.put("trainer.seed", m.int("seed"))
    _precision(m)
    report = m.get("report_to")
    if report is not None:
        names = _logger_names(report)
        kept = [n for n in names if n in LOGGERS]
        m.put("trainer.loggers", list(dict.fromkeys(["console", *kept, "jsonl"])))
        if len(kept) != len(names) and names != ["none"]:
            m.reject("report_to", f"hfsdk loggers: {', '.join(LOGGERS)}")
    if m.has("temperature") or temperature is not None:
        m.put("rollout.temperature", m.num("temperature", temperature, source_default=True))
    if m.has("top_p"):
        m.put("rollout.top_p", m.num("top_p"))
    if m.has("top_k"):
        m.put("rollout.top_k", max(m.int("top_k"), 0))
    if m.has("max_prompt_length"):
        length = m.int("max_prompt_length")
        m.put("data.max_prompt_length", length)  # the rollout's follows from it
        m.note(TRUNCATES.format(length=length))
    _vllm(m)


def _precision(m: Mapper) -> None:
    """``gradient_checkpointing`` and ``bf16``, with TRL's defaults when unset.

    TRL's configs turn both on (``bf16`` unless ``fp16`` is set), hfsdk's actor has both
    off: TRL's defaults are assumed so the imported run computes as TRL's did.
    """
    checkpointing = m.get("gradient_checkpointing", True, source_default=True)
    m.put("actor.gradient_checkpointing", bool(checkpointing))
    # fp16 has no hfsdk counterpart (listed as unmapped); it only turns bf16's default off.
    bf16 = m.get("bf16", True, source_default=True) if not m.flat.get("fp16") else m.get("bf16")
    if bf16:
        m.put("actor.dtype", "bfloat16")


def _positive(m: Mapper, key: str, default: Any = None, *, source_default: bool = False) -> Any:
    """:meth:`Mapper.int` refused below 1 (a count TRL divides or multiplies by)."""
    value = m.int(key, default, source_default=source_default)
    if value is not None and value < 1:
        raise ConfigError(
            f"{key}={value} is not valid; TRL expects an integer >= 1: set {key} to 1 or more"
        )
    return value


def _logger_names(report: Any) -> list[str]:
    """``report_to`` as a list of names; a bare ``--report_to`` (True) or a number is refused."""
    if isinstance(report, str):
        return [report]
    if isinstance(report, list) and all(isinstance(name, str) for name in report):
        return report
    raise ConfigError(
        f"report_to={report!r} is not a logger name or a list of them; "
        f"give names such as --report_to wandb (hfsdk loggers: {', '.join(LOGGERS)})"
    )


def _vllm(m: Mapper) -> None:
    """``use_vllm``: the vLLM rollout (hfsdk's runs in the actor's processes, TRL's colocate)."""
    if not m.get("use_vllm"):
        return
    m.put("rollout.backend", "vllm")
    if m.get("vllm_mode") not in (None, "colocate"):
        m.reject("vllm_mode", "hfsdk's vLLM runs in the actor's processes (TRL's colocate mode)")
    if m.has("vllm_gpu_memory_utilization"):
        m.put("rollout.gpu_memory_utilization", m.num("vllm_gpu_memory_utilization"))
    if m.has("vllm_tensor_parallel_size"):
        m.put("actor.rollout_layout.tp", _positive(m, "vllm_tensor_parallel_size"))
    if m.has("vllm_enable_sleep_mode"):
        m.put("rollout.sleep", "on" if m.get("vllm_enable_sleep_mode") else "off")
    _vllm_correction(m)


def _vllm_correction(m: Mapper) -> None:
    """TRL's vLLM importance-sampling correction (on by default) -> ``rollout_correction``.

    TRL weights the loss by the ratio of the trainer's (π_old) to vLLM's probabilities, per
    token or per sequence, truncated at the cap or zeroed above it: hfsdk's ``tis`` and
    ``mis`` with the same level and cap.
    """
    key = "vllm_importance_sampling_correction"
    if m.has(key) and not m.get(key):
        return
    why_not = _correction_refused(m)
    if why_not is not None:
        if m.has(key):
            m.reject(key, why_not)
        else:
            m.reject_default(key, True, why_not)
        return
    m.get(key, True, source_default=True)
    mode = m.get("vllm_importance_sampling_mode", "sequence_mask", source_default=True)
    if mode not in IS_MODES:
        m.reject(
            "vllm_importance_sampling_mode", f"hfsdk counterparts exist for {', '.join(IS_MODES)}"
        )
        return
    name, level = IS_MODES[mode]
    cap = m.num("vllm_importance_sampling_cap", 3.0, source_default=True)
    m.put("rollout_correction.apply", [{"name": name, "level": level, "cap": cap}])


def _correction_refused(m: Mapper) -> str | None:
    """Why hfsdk refuses an importance-sampling correction with the rollout's sampling, if so.

    As the vLLM rollout's check: at a temperature other than 0 or 1 with top-p/top-k, vLLM
    reports log-probs of the truncated distribution, not the full-vocabulary behaviour
    policy the weights are defined on.
    """
    rollout = m.out.get("rollout", {})
    temperature = float(rollout.get("temperature", 1.0))
    top_p, top_k = float(rollout.get("top_p", 1.0)), int(rollout.get("top_k", 0))
    if temperature in (0.0, 1.0) or (top_p >= 1.0 and top_k <= 0):
        return None
    return (
        f"hfsdk refuses a rollout correction at temperature {temperature:g} with top_p "
        f"{top_p:g}/top_k {top_k}: vLLM cannot report the full-vocabulary behaviour log-probs "
        "the importance weights are defined on; imported without it (use temperature 1, or "
        "top_p 1 and top_k 0, to keep TRL's correction)"
    )


def _tools(m: Mapper) -> None:
    """``GRPOTrainer(tools=[fn])`` written as ``tools: [module:fn, ...]`` -> multi-turn rollouts.

    The functions stay as they are (type hints and docstring give their schemas);
    ``max_tool_calling_iterations`` rounds of tool calls are that many model turns plus
    the answer.
    """
    tools = m.get("tools")
    if tools is None:
        return
    entries = [tools] if isinstance(tools, str) else tools
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ConfigError(
            f"tools={tools!r} is not a list of tool references; give module:function strings, "
            "e.g. tools: [my_pkg.tools:get_weather]"
        )
    m.put("rollout.multi_turn.tools", entries)
    if m.has("max_tool_calling_iterations"):
        m.put("rollout.multi_turn.max_turns", m.int("max_tool_calling_iterations") + 1)
    if m.has("max_completion_length"):
        m.put("rollout.multi_turn.max_response_tokens", m.int("max_completion_length"))


def _processes(m: Mapper) -> int:
    """The launcher's process count; more than one becomes the pool's devices, spread over
    the launcher's nodes (``num_machines``) when it names several.

    TRL's batches are per process, so the caller multiplies them by it.
    """
    processes = _positive(m, "num_processes", 1)
    nodes = _positive(m, "num_machines", 1)
    if processes > 1:
        pool = {"devices": processes}
        if nodes > 1 and processes % nodes == 0:  # hfsdk spreads a pool evenly over nodes
            pool["nodes"] = nodes
        m.put("placement.pools", {"global": pool})
    return processes


def _steps(m: Mapper, per_round: Fraction) -> None:
    """``max_steps``, ``warmup_steps``, ``save_steps`` and ``eval_steps`` (TRL optimizer
    steps) as hfsdk training steps.

    hfsdk's ``trainer.total_steps``, ``save_every`` and ``val_every`` count generation
    rounds, and its LR scheduler steps once per round (the engines' update, not per
    optimizer step), so ``actor.optim.warmup_steps`` counts rounds too: all are TRL's
    counts divided by the ``per_round`` optimizer steps of one round.
    """
    if m.has("max_steps") and as_int("max_steps", m.flat["max_steps"], flag=True) > 0:
        steps = m.int("max_steps")
        total = math.ceil(steps / per_round)  # at least TRL's optimizer steps
        m.put("trainer.total_steps", total)
        _note_inexact(
            m, "max_steps", steps, per_round, f"trainer.total_steps rounded up to {total}"
        )
    elif m.has("num_train_epochs"):
        m.get("max_steps")  # TRL's -1 (or 0): "train num_train_epochs", listed just below
        m.reject("num_train_epochs", EPOCHS)
    else:
        m.get("max_steps")  # as above: TRL falls back to its 3 epochs
        m.reject_default("num_train_epochs", 3.0, EPOCHS)
    if m.has("warmup_steps") and m.flat.get("lr_scheduler_type") == "constant":
        m.reject("warmup_steps", "TRL's lr_scheduler_type=constant has no warmup (transformers')")
    elif m.has("warmup_steps") and 0 < m.num("warmup_steps") < 1:
        # transformers reads a warmup_steps below 1 as a ratio of the run, as warmup_ratio.
        _warmup_from_ratio(m, "warmup_steps", m.num("warmup_steps"), per_round)
    elif m.has("warmup_steps"):
        warmup = m.int("warmup_steps")
        rounds = round(warmup / per_round)
        m.put("actor.optim.warmup_steps", rounds)
        _note_inexact(m, "warmup_steps", warmup, per_round, f"actor.optim.warmup_steps = {rounds}")
    if m.has("warmup_ratio"):
        _warmup_ratio(m, per_round)
    _every(m, "save_steps", "save_strategy", "trainer.save_every", per_round)
    _every(m, "eval_steps", "eval_strategy", "trainer.val_every", per_round)


def _warmup_ratio(m: Mapper, per_round: Fraction) -> None:
    """``warmup_ratio`` -> ``actor.optim.warmup_steps``: ``ceil(ratio × total_steps)`` rounds.

    transformers warms up ``ceil(ratio × max_steps)`` optimizer steps, and only when
    ``warmup_steps`` is not positive and the schedule has a warm-up; the rounds cover at
    least those steps (as OpenRLHF's ``lr_warmup_ratio`` is mapped), said when not exactly.
    """
    if m.has("warmup_steps") and m.num("warmup_steps") > 0:
        m.reject("warmup_ratio", "TRL uses warmup_steps instead when both are set")
        return
    if m.flat.get("lr_scheduler_type") == "constant":
        m.reject("warmup_ratio", "TRL's lr_scheduler_type=constant has no warmup (transformers')")
        return
    _warmup_from_ratio(m, "warmup_ratio", m.num("warmup_ratio"), per_round)


def _warmup_from_ratio(m: Mapper, key: str, ratio: float, per_round: Fraction) -> None:
    """``key`` (a ratio of the run) -> ``actor.optim.warmup_steps`` = ``ceil(ratio × total)``
    rounds, said when not exactly TRL's ``ceil(ratio × max_steps)`` optimizer steps."""
    total = m.out.get("trainer", {}).get("total_steps")
    if total is None:
        why = "needs the total steps" if key == "warmup_ratio" else RATIO_UNSET
        m.reject(
            key,
            f"{why}; set trainer.total_steps and actor.optim.warmup_steps = "
            f"ceil({ratio:g} x trainer.total_steps)",
        )
        return
    # Fraction(str) keeps 0.1 x 100 at 10, not 10.000000000000002 (ceil 11).
    rounds = math.ceil(Fraction(str(ratio)) * total)
    m.put("actor.optim.warmup_steps", rounds)
    steps = math.ceil(Fraction(str(ratio)) * as_int("max_steps", m.flat["max_steps"], flag=True))
    if rounds * per_round != steps:
        m.note(
            f"{key}={ratio:g} is {steps} TRL optimizer steps, "
            f"{float(steps / per_round):g} generation rounds of {float(per_round):g} optimizer "
            f"steps; actor.optim.warmup_steps = {rounds}"
        )


def _every(m: Mapper, key: str, strategy_key: str, dest: str, per_round: Fraction) -> None:
    """``save_steps`` / ``eval_steps`` -> ``dest`` in rounds, when ``strategy_key`` is steps.

    transformers saves by steps unless told otherwise but evaluates only when asked
    (``eval_strategy`` defaults to ``no``); a YAML ``no`` (also a flag's, read as YAML) is
    False, so False is taken as ``no``.
    """
    default = "steps" if key == "save_steps" else "no"
    strategy = m.get(strategy_key, default)
    strategy = "no" if strategy is False else strategy
    if strategy not in ("steps", "no"):
        m.reject(strategy_key, f"hfsdk counts steps: set {dest} (in generation rounds)")
        return
    if not m.has(key):
        return
    if strategy == "no":
        action = "save" if key == "save_steps" else "evaluate"
        m.reject(key, f"TRL does not {action} with {strategy_key}='no' ({dest} is not set)")
        return
    if 0 < m.num(key) < 1:  # transformers: a ratio of the run, ceil(ratio x max_steps) steps
        ratio = m.num(key)
        if "total_steps" not in m.out.get("trainer", {}):
            m.reject(key, f"{RATIO_UNSET}; set {dest} (in generation rounds)")
            return
        steps = math.ceil(
            Fraction(str(ratio)) * as_int("max_steps", m.flat["max_steps"], flag=True)
        )
    else:
        steps = m.int(key)
    # Rounded to the nearest round, but a positive interval stays positive (0 means never).
    every = max(round(steps / per_round), 1) if steps > 0 else 0
    m.put(dest, every)
    _note_inexact(m, key, steps, per_round, f"{dest} = {every}")


def _note_inexact(m: Mapper, key: str, steps: int, per_round: Fraction, what: str) -> None:
    """Say so when ``per_round`` does not divide the ``steps`` of ``key``."""
    if steps % per_round:
        m.note(
            f"{key}={steps} TRL optimizer steps is {float(steps / per_round):g} generation "
            f"rounds of {float(per_round):g} optimizer steps; {what}"
        )


def _grpo(m: Mapper) -> None:
    n = m.int("num_generations", 8, source_default=True)
    per_device = _positive(m, "per_device_train_batch_size", 8, source_default=True)
    accumulation = _positive(m, "gradient_accumulation_steps", 1)
    processes = _processes(m)
    m.put("algorithm.n_samples_per_prompt", n)
    m.put("actor.micro_batch_size", per_device)
    m.put("actor.mini_batch_size", per_device * accumulation * processes)
    steps_per_generation = _positive(m, "steps_per_generation", accumulation)
    generation = m.get("generation_batch_size")
    responses = (
        as_int("generation_batch_size", generation, flag=True)
        if generation not in (None, 0)  # "" too: refused by as_int, not taken as unset
        else per_device * steps_per_generation * processes
    )
    if n < 1:
        raise ConfigError(f"num_generations={n}; GRPO needs at least 1 (TRL's default is 8)")
    if responses % n:
        raise ConfigError(
            f"the generation batch ({responses} responses) is not a multiple of "
            f"num_generations={n}; TRL would refuse it too"
        )
    m.put("data.batch_size", responses // n)
    iterations = _positive(m, "num_iterations", 1)
    m.put("actor.ppo_epochs", iterations)
    # TRL steps the optimizer every `accumulation` micro-batches of `per_device` on every
    # process, over the round's responses, `num_iterations` times.
    _steps(m, Fraction(responses, per_device * accumulation * processes) * iterations)
    beta = m.num("beta", 0.0, source_default=True)
    m.put("algorithm.kl_loss_coef", beta)
    m.put("algorithm.kl_estimator", "k3")  # TRL's GRPO KL term is the k3 estimator
    epsilon = m.num("epsilon", 0.2)
    m.put("policy_loss.clip_ratio_low", epsilon)
    m.put("policy_loss.clip_ratio_high", m.num("epsilon_high", epsilon))
    length = m.int("max_completion_length", 256, source_default=True)
    m.put("rollout.max_response_length", length)
    # Current GRPOConfig has no prompt limit (prompts stay whole; older releases truncated
    # at 512), and hfsdk's own limit drops longer prompts: no value would be TRL's.
    m.reject_default(
        "max_prompt_length",
        None,
        "TRL keeps prompts whole; hfsdk drops prompts over data.max_prompt_length (default "
        "64): set it to your longest prompt, `hfsdk data inspect` counts the dropped",
    )
    _tools(m)
    loss_type = m.get("loss_type")
    if loss_type in LOSS_TYPES:
        m.put("algorithm.loss_agg_mode", LOSS_TYPES[loss_type])
    elif loss_type is not None:
        m.reject("loss_type", f"hfsdk counterparts exist for {', '.join(LOSS_TYPES)}")
    scale = m.get("scale_rewards")
    if scale in (True, "group"):
        m.put("advantage.norm_by_std", True)
    elif scale in (False, "none"):
        m.put("advantage.norm_by_std", False)
    elif scale is not None:
        m.reject("scale_rewards", "hfsdk's grpo estimator scales per group or not at all")
    level = m.get("importance_sampling_level")
    if level == "sequence":
        m.put("algorithm.policy_loss", "gspo")  # no dual clip there to turn off
    else:
        if level not in (None, "token"):
            m.reject("importance_sampling_level", "token or sequence")
        # TRL's clipped loss has no dual clip; hfsdk's ppo_clip has one by default (c = 3).
        m.put("policy_loss.clip_ratio_c", None)


def _ppo(m: Mapper) -> None:
    per_device = _positive(m, "per_device_train_batch_size", 8, source_default=True)
    accumulation = _positive(m, "gradient_accumulation_steps", 1)
    mini_batches = _positive(m, "num_mini_batches", 1)
    processes = _processes(m)
    for role in ("actor", "critic"):
        m.put(f"{role}.micro_batch_size", per_device)
        m.put(f"{role}.mini_batch_size", per_device * accumulation * processes)
    m.put("data.batch_size", per_device * accumulation * mini_batches * processes)
    # TRL's PPOTrainer steps its LR scheduler once per batch: its steps are rounds already.
    _steps(m, Fraction(1))
    epochs = m.int("num_ppo_epochs", 4, source_default=True)
    m.put("actor.ppo_epochs", epochs)
    m.put("critic.ppo_epochs", epochs)
    clip = m.num("cliprange", 0.2)
    m.put("policy_loss.clip_ratio_low", clip)
    m.put("policy_loss.clip_ratio_high", clip)
    m.put("policy_loss.clip_ratio_c", None)  # TRL's PPO loss has no dual clip; hfsdk's does
    m.put("value_loss.clip_range_value", m.num("cliprange_value", 0.2))
    m.put("algorithm.kl_in_reward", True)
    m.put("algorithm.kl_coef", m.num("kl_coef", 0.05))
    estimator = m.get("kl_estimator", "k1")
    if estimator in ("k1", "k3"):
        m.put("algorithm.kl_estimator", estimator)
    else:
        m.reject("kl_estimator", "k1 or k3")
    m.put("advantage.gamma", m.num("gamma", 1.0))
    m.put("advantage.lam", m.num("lam", 0.95))
    m.put("rollout.max_response_length", m.int("response_length", 53, source_default=True))
    if m.has("sft_model_path"):
        m.put("actor.model_path", str(m.get("sft_model_path")))


def _peft(m: Mapper) -> None:
    """``use_peft`` with TRL ``ModelConfig``'s LoRA keys -> ``actor.lora``.

    TRL's defaults apply to what is left out (``lora_r`` 16, ``lora_alpha`` 32,
    ``lora_dropout`` 0.05); its unset ``lora_target_modules`` leaves the targets to peft,
    whose choice for Llama/Qwen2/Mistral models, ``q_proj`` and ``v_proj``, is assumed and
    said. Without ``use_peft`` TRL trains the full model and the keys are listed as not used.
    """
    if not m.get("use_peft"):
        return
    rank = m.int("lora_r", 16, source_default=True)
    if rank <= 0:
        m.reject("lora_r", "peft refuses a LoRA rank below 1 (TRL would not start); imported "
                 "as a full fine-tune")  # fmt: skip
        for key in PEFT_KEYS[1:]:
            m.get(key)  # settings of adapters that are not built
        return
    m.put("actor.lora.rank", rank)
    m.put("actor.lora.alpha", m.num("lora_alpha", 32, source_default=True))
    m.put("actor.lora.dropout", m.num("lora_dropout", 0.05, source_default=True))
    if not m.has("lora_target_modules"):
        m.note(
            "use_peft without lora_target_modules: peft picks the targets by model type "
            f"({', '.join(PEFT_DEFAULT_TARGETS)} for Llama/Qwen2/Mistral models), imported as "
            "actor.lora.target_modules: set it for another architecture"
        )
    value = m.get("lora_target_modules", PEFT_DEFAULT_TARGETS, source_default=True)
    targets = lora_targets("lora_target_modules", value)
    if targets is None:
        m.reject("lora_target_modules", LORA_REGEX)
    else:
        m.put("actor.lora.target_modules", targets)
    for key, why in PEFT_LACKS.items():
        if m.flat.get(key) in (None, False, [], ""):
            m.get(key)  # off: as hfsdk
        else:
            m.reject(key, why)
    if m.get("lora_task_type", "CAUSAL_LM") != "CAUSAL_LM":
        m.reject("lora_task_type", "hfsdk's adapters are on the actor's causal LM (CAUSAL_LM)")


def _refuse_dpo(m: Mapper, algo: str | None) -> None:
    """Refuse a TRL ``DPOConfig`` (or ``--algo dpo``): this importer maps GRPO/PPO configs.

    A DPOConfig shares ``beta`` and ``loss_type`` with GRPOConfig, so without this check it
    would import as GRPO with its DPO beta as the KL coefficient.
    """
    shown = [f"{key}={m.flat[key]!r}" for key in DPO_ONLY if m.has(key)]
    losses = m.flat.get("loss_type")
    if any(loss in DPO_LOSS_TYPES for loss in (losses if isinstance(losses, list) else [losses])):
        shown.append(f"loss_type={losses!r}")
    if m.has("max_length") and m.has("beta"):  # GRPOConfig has beta but no max_length
        shown.append("max_length with beta")
    if not shown and algo != "dpo":
        return
    told = f"{', '.join(shown)} show a TRL DPOConfig" if shown else "--algo dpo"
    raise ConfigError(
        f"{told}: this importer maps TRL's GRPOConfig/PPOConfig; a DPOConfig is not imported: "
        "write an hfsdk dpo config (docs/algorithms.md, DPO section)"
    )


def import_trl(m: Mapper, algo: str | None) -> str:
    """Map TRL keys from ``m`` into hfsdk keys; returns the hfsdk algorithm chosen."""
    m.flags = True  # TRL's keys are its --flags: a bare one is refused naming --key
    _refuse_dpo(m, algo)
    chosen = algo or ("ppo" if any(m.has(key) for key in PPO_ONLY) else "grpo")
    m.put("algo", chosen)
    if chosen == "ppo":
        _common(m, 3e-6, temperature=0.7)
        _ppo(m)
    else:
        _common(m, 1e-6, temperature=None)
        _grpo(m)
    _peft(m)
    m.check_unknown("TRL", UNMAPPED, CONDITIONAL, UNKNOWN)
    return chosen
