"""hfsdk: a plugin-based SDK for RL post-training of language models.

This module is the public surface: everything a plugin author needs is
importable from ``hfsdk`` (plugins in this repository import nothing else).
Names are loaded lazily so ``import hfsdk`` (and ``hfsdk --help``) stays fast
and never imports torch or ray; the ``TYPE_CHECKING`` block below lets editors
and type checkers resolve them.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("hfsdk")
"""Marker for hook implementations in plugins: ``@hfsdk.hookimpl``."""

if TYPE_CHECKING:
    from hfsdk.core.algorithm import (
        Algorithm,
        AlgorithmConfig,
        AlgorithmContext,
        GenerationSource,
        PromptSource,
        Scorer,
        TrainerAlgorithmConfig,
    )
    from hfsdk.core.algorithm_spec import (
        KIND_OPERATIONS,
        REF_TOP_K,
        ROLE_KINDS,
        ActorLossTerms,
        AlgorithmSpec,
        RoleKind,
        RoleSpec,
        TokenIdsLossTerm,
        default_actor_objective,
    )
    from hfsdk.core.atomic import atomic_path, write_bytes_atomic, write_text_atomic
    from hfsdk.core.backends import default_rollout_backend
    from hfsdk.core.batch import ROW_GROUP, Batch, group_split, row_group
    from hfsdk.core.behaviour_log_probs import behaviour_log_probs_needed
    from hfsdk.core.checkpoint_files import load_checkpoint_file
    from hfsdk.core.config.converter import make_converter, structure
    from hfsdk.core.config.help import field_help, help_field
    from hfsdk.core.config.loader import apply_overrides, load_yaml
    from hfsdk.core.config.rollout_sections import RolloutSection
    from hfsdk.core.config.run_config import (
        load_run_config,
        resolve_run_config,
        with_algorithm_preset,
    )
    from hfsdk.core.config.safe_yaml import load_yaml_text, read_config_text
    from hfsdk.core.config.signal_config import SignalConfig
    from hfsdk.core.data.columns import (
        HIDDEN_COLUMNS,
        INTERNAL_COLUMNS,
        PROMPT_MESSAGES,
        RENDERED_PROMPT,
    )
    from hfsdk.core.data.data_config import DataConfig
    from hfsdk.core.data.prompt_source import PromptRequest, PromptSet, PromptStream, RunPrompts
    from hfsdk.core.data.tokenizer_loading import load_tokenizer
    from hfsdk.core.dataflow import WORK_KINDS, Dataflow, Stage
    from hfsdk.core.deadlines import DeadlineExceeded, deadline
    from hfsdk.core.determinism import disable_determinism, enable_determinism
    from hfsdk.core.errors import ConfigError, DuplicateNameError, HfsdkError, UnknownNameError
    from hfsdk.core.generation_requests import run_coroutine
    from hfsdk.core.generation_strategy import GenerationStrategy, generate_rollout
    from hfsdk.core.maths.aggregation import (
        LOSS_AGG_MODES,
        LossAggMode,
        LossAggregation,
        LossCounts,
        aggregate_loss,
        global_counts,
        local_counts,
    )
    from hfsdk.core.maths.kl import apply_kl_penalty, resolve_kl_estimator, token_kl
    from hfsdk.core.maths.masked import (
        as_bool_mask,
        check_per_sample,
        check_token_tensors,
        masked_fill_zero,
        masked_mean,
        masked_sum,
        masked_var,
        masked_whiten,
    )
    from hfsdk.core.maths.protocols import (
        AdvantageEstimator,
        AdvantageResult,
        KLEstimator,
        PolicyLoss,
        ValueLoss,
    )
    from hfsdk.core.model_inputs import MODEL_INPUTS, ModelInputs, model_inputs_of
    from hfsdk.core.plugin_manager import get_plugin_manager, get_registry, reset_plugin_manager
    from hfsdk.core.registry import Registry, RegistryEntry, unknown_name_message
    from hfsdk.core.reward_scoring import RewardScorer
    from hfsdk.core.rng import set_torch_rng_state, torch_rng_state
    from hfsdk.core.role_config import RoleConfig, RolloutConfig
    from hfsdk.core.rollout_contract import (
        ActorSource,
        DataParallelInfo,
        GenerationRequest,
        GenerationResult,
        RolloutBackend,
        build_rollout,
    )
    from hfsdk.core.rollout_output import (
        assemble_rollout,
        eos_token_ids,
        merge_rollout_metrics,
        position_ids_from_mask,
        response_mask_from_eos,
    )
    from hfsdk.core.run_spec import run_spec
    from hfsdk.core.segments import SEGMENT_INDEX, TRAJECTORY_ID, last_segments
    from hfsdk.core.stop_requests import stop_requested
    from hfsdk.core.tasks import (
        DEFAULT_TASK,
        Task,
        TaskAssets,
        cache_root,
        default_model_config,
        default_model_dir,
        default_task_assets,
        get_task,
        task_names,
    )
    from hfsdk.core.trainer.checkpoint import complete_checkpoints, verify_checkpoint
    from hfsdk.core.trainer.faults import take_fault
    from hfsdk.core.trainer.placement_config import ROLLOUT_POOL
    from hfsdk.core.trainer.preflight import prepare_run, run_assets, run_signals
    from hfsdk.core.trainer.run_directory import CONFIG_FILE, TRAINER_STATE
    from hfsdk.core.trainer.session import TrainingSession
    from hfsdk.core.trainer.step_observers import StepObserver, StepView, StopRun
    from hfsdk.core.trainer.threads import worker_threads
    from hfsdk.core.trainer.tracking import METRICS_FILE, read_metrics
    from hfsdk.core.trainer.trainer_config import LOGGERS
    from hfsdk.core.trainer.validation import ValidationResult
    from hfsdk.core.workers import (
        BuiltinProtocol,
        ResourcePool,
        TransferProtocol,
        Worker,
        WorkerGroup,
        register,
    )
    from hfsdk.core.workers.colocation import colocate
    from hfsdk.core.workers.errors import WorkerDiedError, WorkerError, WorkerTimeoutError
    from hfsdk.core.workers.local_hosts import LocalPool
    from hfsdk.core.workers.protocols import (
        DispatchContext,
        DispatchPlan,
        check_mesh,
        collect_mean_metrics,
        padding_rows,
        split_rows,
    )
    from hfsdk.core.workers.ray_runtime import connect_ray, shutdown_ray
    from hfsdk.hookspecs import Register

_LAZY = {
    # plugins and registries
    "get_plugin_manager": "hfsdk.core.plugin_manager",
    "get_registry": "hfsdk.core.plugin_manager",
    "reset_plugin_manager": "hfsdk.core.plugin_manager",
    # the task registry (hfsdk_register_tasks)
    "Task": "hfsdk.core.task_spec",
    "TaskAssets": "hfsdk.core.task_spec",
    "get_task": "hfsdk.core.tasks",
    "task_names": "hfsdk.core.tasks",
    "default_task_assets": "hfsdk.core.tasks",
    "default_model_dir": "hfsdk.core.tasks",
    "default_model_config": "hfsdk.core.tasks",
    "cache_root": "hfsdk.core.task_spec",
    "DEFAULT_TASK": "hfsdk.core.task_spec",
    "Registry": "hfsdk.core.registry",
    "RegistryEntry": "hfsdk.core.registry",
    "unknown_name_message": "hfsdk.core.registry",
    "Register": "hfsdk.hookspecs",
    "StepObserver": "hfsdk.core.trainer.step_observers",
    "StepView": "hfsdk.core.trainer.step_observers",
    "StopRun": "hfsdk.core.trainer.step_observers",
    "ValidationResult": "hfsdk.core.trainer.validation",
    # algorithms
    "Algorithm": "hfsdk.core.algorithm",
    "AlgorithmConfig": "hfsdk.core.algorithm",
    "TrainerAlgorithmConfig": "hfsdk.core.algorithm",
    "AlgorithmContext": "hfsdk.core.algorithm",
    "PromptSource": "hfsdk.core.algorithm",
    "Scorer": "hfsdk.core.algorithm",
    "AlgorithmSpec": "hfsdk.core.algorithm_spec",
    "RoleSpec": "hfsdk.core.algorithm_spec",
    "RoleKind": "hfsdk.core.algorithm_spec",
    "ROLE_KINDS": "hfsdk.core.algorithm_spec",
    "KIND_OPERATIONS": "hfsdk.core.algorithm_spec",
    "ActorLossTerms": "hfsdk.core.algorithm_spec",
    "TokenIdsLossTerm": "hfsdk.core.algorithm_spec",
    "default_actor_objective": "hfsdk.core.algorithm_spec",
    "run_spec": "hfsdk.core.run_spec",
    "Dataflow": "hfsdk.core.dataflow",
    "Stage": "hfsdk.core.dataflow",
    # data, config and errors
    "Batch": "hfsdk.core.batch",
    "ROW_GROUP": "hfsdk.core.batch",
    "REF_TOP_K": "hfsdk.core.algorithm_spec",
    "group_split": "hfsdk.core.batch",
    "row_group": "hfsdk.core.batch",
    "default_rollout_backend": "hfsdk.core.backends",
    "RoleConfig": "hfsdk.core.role_config",
    "RolloutConfig": "hfsdk.core.role_config",
    # the rollout contract
    "RolloutBackend": "hfsdk.core.rollout_contract",
    # generation strategies (hfsdk_wrap_generation) and rollout sub-sections
    "generate_rollout": "hfsdk.core.generation_strategy",
    "GenerationStrategy": "hfsdk.core.generation_strategy",
    "RolloutSection": "hfsdk.core.config.rollout_sections",
    "stop_requested": "hfsdk.core.stop_requests",
    "ActorSource": "hfsdk.core.rollout_contract",
    "DataParallelInfo": "hfsdk.core.rollout_contract",
    "GenerationRequest": "hfsdk.core.rollout_contract",
    "GenerationResult": "hfsdk.core.rollout_contract",
    "run_coroutine": "hfsdk.core.generation_requests",
    "build_rollout": "hfsdk.core.rollout_contract",
    "assemble_rollout": "hfsdk.core.rollout_output",
    "MODEL_INPUTS": "hfsdk.core.model_inputs",
    "ModelInputs": "hfsdk.core.model_inputs",
    "model_inputs_of": "hfsdk.core.model_inputs",
    "eos_token_ids": "hfsdk.core.rollout_output",
    "merge_rollout_metrics": "hfsdk.core.rollout_output",
    "position_ids_from_mask": "hfsdk.core.rollout_output",
    "response_mask_from_eos": "hfsdk.core.rollout_output",
    "SEGMENT_INDEX": "hfsdk.core.segments",
    "TRAJECTORY_ID": "hfsdk.core.segments",
    "last_segments": "hfsdk.core.segments",
    "help_field": "hfsdk.core.config.help",
    "field_help": "hfsdk.core.config.help",
    "HfsdkError": "hfsdk.core.errors",
    "load_tokenizer": "hfsdk.core.data.tokenizer_loading",
    # files: atomic writes, checkpoint files read without unpickling code
    "atomic_path": "hfsdk.core.atomic",
    "write_bytes_atomic": "hfsdk.core.atomic",
    "write_text_atomic": "hfsdk.core.atomic",
    "load_checkpoint_file": "hfsdk.core.checkpoint_files",
    "ConfigError": "hfsdk.core.errors",
    "UnknownNameError": "hfsdk.core.errors",
    "DuplicateNameError": "hfsdk.core.errors",
    # maths
    "AdvantageResult": "hfsdk.core.maths.protocols",
    "AdvantageEstimator": "hfsdk.core.maths.protocols",
    "PolicyLoss": "hfsdk.core.maths.protocols",
    "ValueLoss": "hfsdk.core.maths.protocols",
    "KLEstimator": "hfsdk.core.maths.protocols",
    "behaviour_log_probs_needed": "hfsdk.core.behaviour_log_probs",
    "LOSS_AGG_MODES": "hfsdk.core.maths.aggregation",
    "LossAggMode": "hfsdk.core.maths.aggregation",
    "LossAggregation": "hfsdk.core.maths.aggregation",
    "LossCounts": "hfsdk.core.maths.aggregation",
    "aggregate_loss": "hfsdk.core.maths.aggregation",
    "global_counts": "hfsdk.core.maths.aggregation",
    "local_counts": "hfsdk.core.maths.aggregation",
    "apply_kl_penalty": "hfsdk.core.maths.kl",
    "resolve_kl_estimator": "hfsdk.core.maths.kl",
    "token_kl": "hfsdk.core.maths.kl",
    "as_bool_mask": "hfsdk.core.maths.masked",
    "check_per_sample": "hfsdk.core.maths.masked",
    "check_token_tensors": "hfsdk.core.maths.masked",
    "masked_fill_zero": "hfsdk.core.maths.masked",
    "masked_mean": "hfsdk.core.maths.masked",
    "masked_sum": "hfsdk.core.maths.masked",
    "masked_var": "hfsdk.core.maths.masked",
    "masked_whiten": "hfsdk.core.maths.masked",
    # workers
    "Worker": "hfsdk.core.workers",
    "WorkerGroup": "hfsdk.core.workers",
    "ResourcePool": "hfsdk.core.workers",
    "register": "hfsdk.core.workers",
    "BuiltinProtocol": "hfsdk.core.workers",
    "TransferProtocol": "hfsdk.core.workers",
    "padding_rows": "hfsdk.core.workers.protocols.rows",
    "DispatchContext": "hfsdk.core.workers.protocols.types",
    "DispatchPlan": "hfsdk.core.workers.protocols.types",
    "check_mesh": "hfsdk.core.workers.protocols.rows",
    "collect_mean_metrics": "hfsdk.core.workers.protocols.builtins",
    "split_rows": "hfsdk.core.workers.protocols.rows",
    "torch_rng_state": "hfsdk.core.rng",
    "set_torch_rng_state": "hfsdk.core.rng",
    # verified weight syncs (docs/async.md#verified-weight-syncs)
    "take_fault": "hfsdk.core.trainer.faults",
    # migration (issue 34): config files, run configs, reward call styles
    "load_yaml": "hfsdk.core.config.loader",
    "apply_overrides": "hfsdk.core.config.loader",
    "load_yaml_text": "hfsdk.core.config.safe_yaml",
    "read_config_text": "hfsdk.core.config.safe_yaml",
    "resolve_run_config": "hfsdk.core.config.run_config",
    "with_algorithm_preset": "hfsdk.core.config.run_config",
    "LOGGERS": "hfsdk.core.trainer.trainer_config",
    "load_run_config": "hfsdk.core.config.run_config",
    "make_converter": "hfsdk.core.config.converter",
    "structure": "hfsdk.core.config.converter",
    # migration (issue 34): what `hfsdk data inspect` checks as a run would
    "DataConfig": "hfsdk.core.data.data_config",
    "INTERNAL_COLUMNS": "hfsdk.core.data.columns",
    "PROMPT_MESSAGES": "hfsdk.core.data.columns",
    "RENDERED_PROMPT": "hfsdk.core.data.columns",
    # a run's prompts (hfsdk_load_prompts)
    "PromptRequest": "hfsdk.core.data.prompt_source",
    "PromptSet": "hfsdk.core.data.prompt_source",
    "PromptStream": "hfsdk.core.data.prompt_source",
    "RunPrompts": "hfsdk.core.data.prompt_source",
    "run_assets": "hfsdk.core.trainer.preflight",
    "run_signals": "hfsdk.core.trainer.preflight",
    # the placement plugin's needs (hfsdk-plugin-planner)
    "WORK_KINDS": "hfsdk.core.dataflow",
    "ROLLOUT_POOL": "hfsdk.core.trainer.placement_config",
    "METRICS_FILE": "hfsdk.core.trainer.tracking",
    "read_metrics": "hfsdk.core.trainer.tracking",
    "colocate": "hfsdk.core.workers.colocation",
    "LocalPool": "hfsdk.core.workers.local_hosts",
    "worker_threads": "hfsdk.core.trainer.threads",
    "connect_ray": "hfsdk.core.workers.ray_runtime",
    "shutdown_ray": "hfsdk.core.workers.ray_runtime",
    # the reward contract (hfsdk_build_reward_scorer) and what its scorer plugin needs
    "RewardScorer": "hfsdk.core.reward_scoring",
    "SignalConfig": "hfsdk.core.config.signal_config",
    "HIDDEN_COLUMNS": "hfsdk.core.data.columns",
    "deadline": "hfsdk.core.deadlines",
    "DeadlineExceeded": "hfsdk.core.deadlines",
    # run records (replay and export start a run's workers from its directory)
    "CONFIG_FILE": "hfsdk.core.trainer.run_directory",
    "TRAINER_STATE": "hfsdk.core.trainer.run_directory",
    "TrainingSession": "hfsdk.core.trainer.session",
    "prepare_run": "hfsdk.core.trainer.preflight",
    "complete_checkpoints": "hfsdk.core.trainer.checkpoint",
    "verify_checkpoint": "hfsdk.core.trainer.checkpoint",
    "enable_determinism": "hfsdk.core.determinism",
    "disable_determinism": "hfsdk.core.determinism",
    # generation ahead of training (hfsdk_build_generation_pipeline)
    "GenerationSource": "hfsdk.core.algorithm",
    "WorkerError": "hfsdk.core.workers.errors",
    "WorkerDiedError": "hfsdk.core.workers.errors",
    "WorkerTimeoutError": "hfsdk.core.workers.errors",
}

__all__ = ["__version__", "hookimpl", *_LAZY]


def __getattr__(name: str) -> Any:
    if name == "Protocol":  # the old name; it read like typing.Protocol
        warnings.warn(
            "hfsdk.Protocol is deprecated; use hfsdk.BuiltinProtocol",
            DeprecationWarning,
            stacklevel=2,
        )
        name = "BuiltinProtocol"
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hfsdk' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
