"""hfsdk: a plugin-based SDK for RL post-training of language models.

This module is the public surface: everything a plugin author needs is
importable from ``hfsdk`` (plugins in this repository import nothing else).
Names are loaded lazily so ``import hfsdk`` (and ``hfsdk --help``) stays fast
and never imports torch or ray; the ``TYPE_CHECKING`` block below lets editors
and type checkers resolve them.
"""

from __future__ import annotations

import functools
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
        TRAINED_KINDS,
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
    from hfsdk.core.config.paths import absolute_file_spec, absolute_if_exists
    from hfsdk.core.config.rollout_sections import RolloutSection
    from hfsdk.core.config.run_config import (
        load_run_config,
        resolve_run_config,
        with_algorithm_preset,
    )
    from hfsdk.core.config.safe_yaml import load_yaml_text, read_config_text
    from hfsdk.core.config.signal_config import SignalConfig
    from hfsdk.core.data.columns import (
        DATA_DIR,
        HIDDEN_COLUMNS,
        INTERNAL_COLUMNS,
        PROMPT_MESSAGES,
        RENDERED_PROMPT,
        plain_rendering,
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
    from hfsdk.core.rng import seeded_rng, set_torch_rng_state, torch_rng_state
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
    from hfsdk.core.trainer.preflight import prepare_run, run_assets, run_signals, run_tool_schemas
    from hfsdk.core.trainer.run_directory import CONFIG_FILE, TRAINER_STATE
    from hfsdk.core.trainer.session import TrainingSession, local_executor_problem
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
    from hfsdk.core.workers.host import IN_PROCESS_NODE_ID
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


@functools.cache
def _public_names() -> dict[str, str]:
    """Public name -> the module it is imported from, read off the ``TYPE_CHECKING``
    imports above: one list serves editors, type checkers and the lazy lookup."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def __getattr__(name: str) -> Any:
    if name == "_LAZY":
        return _public_names()
    if name == "__all__":  # read by ``from hfsdk import *`` and documentation tools
        return ["__version__", "hookimpl", *_public_names()]
    if name == "Protocol":  # the old name; it read like typing.Protocol
        deprecated = "hfsdk.Protocol is deprecated; use hfsdk.BuiltinProtocol"
        warnings.warn(deprecated, DeprecationWarning, stacklevel=2)
        name = "BuiltinProtocol"
    module = _public_names().get(name)
    if module is None:
        raise AttributeError(f"module 'hfsdk' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __getattr__("__all__")
