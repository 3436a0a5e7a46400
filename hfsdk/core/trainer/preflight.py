"""Everything about a run that can be checked before Ray starts, checked once.

:func:`prepare_run` resolves the assets (building the default task's when the
config names none), checks the Ray address, the data (loaded and tokenised by the
plugin answering ``hfsdk_load_prompts``), the reward/cost functions and the plugins'
preflight checks (the model directories are the backends'), and returns what it built.
Each problem is one :class:`~hfsdk.core.errors.HfsdkError` line naming the key,
the bad value and what to do; nothing is written to the run directory before this passes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk.core.config.run_config import RunConfig
from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import call_each, get_plugin_manager, get_registry, plugin_code

if TYPE_CHECKING:
    from hfsdk.core.algorithm_spec import AlgorithmSpec
    from hfsdk.core.data.prompt_source import PromptSet, PromptStream

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class PreparedRun:
    """What :func:`prepare_run` built: assets, tokenizer, prompts and signal configs."""

    assets: Any
    tokenizer: Any
    loader: PromptStream
    """The training prompts (:class:`~hfsdk.core.data.prompt_source.PromptStream`)."""
    val_loader: PromptSet | None
    signal_configs: dict[str, Any]
    tools: list[Any] = attrs.field(factory=list)
    """The JSON schemas of the tools the prompts offer (multi-turn rollouts)."""
    reward_scorers: dict[str, Any] = attrs.field(factory=dict)
    """Each signal section that lists functions -> its :class:`hfsdk.RewardScorer`."""
    row_columns: tuple[str, ...] = ()
    """The columns of a training row (what reward functions may read)."""


STARTUP_BASE_S = 120.0
STARTUP_S_PER_GIB = 60.0
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def weight_bytes(path: str | Path) -> int:
    """Bytes of the weight files in model directory ``path`` (0 if there are none)."""
    files = Path(path).iterdir() if Path(path).is_dir() else ()
    return sum(f.stat().st_size for f in files if f.is_file() and f.name.endswith(_WEIGHT_SUFFIXES))


def startup_deadline_s(config: RunConfig, spec: AlgorithmSpec, assets: Any) -> float:
    """``trainer.startup_timeout_s``, or one scaled to the largest model the roles load.

    Loading is bound by reading the weights (and, on many ranks, by broadcasting
    them), so the deadline grows with their size; it is separate from the
    per-call deadline so a 70B start-up does not force a long deadline on every call.
    """
    if config.trainer.startup_timeout_s:
        return float(config.trainer.startup_timeout_s)
    from hfsdk.core.config.signal_config import SignalConfig

    sections = [getattr(config, role, None) for role in spec.role_names]
    models = [s.model if isinstance(s, SignalConfig) else s for s in sections]  # a scorer's
    paths = [assets.model_path, *(getattr(m, "model_path", None) for m in models)]
    largest = max((weight_bytes(p) for p in paths if p), default=0)
    return STARTUP_BASE_S + STARTUP_S_PER_GIB * largest / 2**30


def run_tool_schemas(config: Any) -> list[Any]:
    """The tools a run's prompts announce (``hfsdk_prompt_tool_schemas``; empty for none)."""
    answers = call_each(get_plugin_manager().hook.hfsdk_prompt_tool_schemas, config=config)
    return [dict(schema) for answer in answers if answer for schema in answer]


RUN_RECORDS = "hfsdk-plugin-run-records"
"""The distribution that keeps a run's records (``trainer.rollout_dump``) and trains from
them (``trainer.mode: train_only``)."""
VALIDATION = "hfsdk-plugin-validation"
"""The distribution that validates (``hfsdk_validate``: mean@n, pass@k, maj@k)."""
PIPELINES = "hfsdk-plugin-pipelines"
"""The distribution of ``trainer.pipeline: one_step_off|async`` and the rollout pool's syncs."""


def check_features(config: RunConfig, validates: bool = False) -> None:
    """Refuse, in one line naming the distribution to install, a feature ``config`` asks for
    that no loaded plugin implements. Validation is checked alone, with ``validates`` (a
    policy and validation files: known once the assets resolve)."""
    from hfsdk.core.cli.known_commands import MissingPluginError, missing_plugin_message
    from hfsdk.core.trainer.placement_config import NO_PLACEMENT_PLUGIN, ROLLOUT_POOL

    trainer, hook = config.trainer, get_plugin_manager().hook

    def has(name: str) -> bool:
        return bool(getattr(hook, name).get_hookimpls())

    pipeline, tokens = has("hfsdk_build_generation_pipeline"), trainer.partial_rollout_tokens
    dump = "trainer.rollout_dump=true" if trainer.rollout_dump else "trainer.mode=rollout_only"
    # (does the config ask for it, the key that asks, is it implemented, the distribution)
    rows = [
        (trainer.pipeline != "sync", f"trainer.pipeline={trainer.pipeline}", pipeline, PIPELINES),
        (ROLLOUT_POOL in config.placement.pools, f"placement.pools.{ROLLOUT_POOL}", pipeline,
         PIPELINES),
        (bool(tokens), f"trainer.partial_rollout_tokens={tokens}", pipeline, PIPELINES),
        (config.placement.mode == "auto", "", has("hfsdk_resolve_placement"), ""),
        (trainer.mode == "train_only", "trainer.mode=train_only", has("hfsdk_recorded_generations"),
         RUN_RECORDS),
        (trainer.rollout_dump or trainer.mode == "rollout_only", dump,
         "rollout_dump" in get_registry("step_observers"), RUN_RECORDS),
    ]  # fmt: skip
    if validates:
        every, first = trainer.val_every, trainer.val_before_train
        key = f"trainer.val_every={every}" if every else "trainer.val_before_train"
        rows = [(every > 0 or first, key, has("hfsdk_validate"), VALIDATION)]
    missing: dict[str, list[str]] = {}
    for asked, key, implemented, distribution in rows:
        if asked and not implemented:
            missing.setdefault(distribution, []).append(key)
    for distribution, keys in missing.items():
        if not distribution:  # placement.mode=auto: its own line (the session stops with it too)
            raise HfsdkError(NO_PLACEMENT_PLUGIN)
        raise MissingPluginError(missing_plugin_message(" and ".join(keys), distribution))


def run_assets(config: RunConfig, spec: AlgorithmSpec) -> Any:
    """The model, tokenizer and data files a run of ``config`` uses (``RunAssets``): the
    config's, else the default task's (built on first use), as the run resolves them."""
    from hfsdk.core.trainer.run_assets import resolve_assets

    return resolve_assets(
        config,
        spec.main_role,
        cold_model=spec.default_model == "cold",
        preference_pairs=spec.default_data == "preference_pairs",
    )


def run_signals(config: RunConfig, spec: AlgorithmSpec, assets: Any) -> dict[str, Any]:
    """Each scorer role's signal as the run scores it (unset: the default task's own)."""
    from hfsdk.core.trainer.run_assets import signal_config_of

    optional = {role.name for role in spec.roles if role.optional and not assets.default_task}
    return {
        role: signal_config_of(config, role, assets.default_task)
        for role in spec.roles_of_kind("scorer")
        if role not in optional or getattr(config, role).functions or getattr(config, role).model
    }


def prepare_run(config: RunConfig, spec: AlgorithmSpec) -> PreparedRun:
    """Check and build everything a session needs that does not need Ray."""
    from hfsdk.core.data.prompt_source import PromptRequest, prompts_for_run
    from hfsdk.core.data.tokenizer_loading import load_tokenizer
    from hfsdk.core.workers.ray_runtime import (
        check_auth_mode,
        check_reachable,
        default_virtual_devices,
        resolve_address,
    )

    check_features(config)
    address = resolve_address(config.trainer.ray_address)
    if address is not None:
        check_reachable(address)
    elif config.trainer.executor == "ray":  # a local instance will start: it keeps its auth
        check_auth_mode(config.trainer.ray_allow_no_auth)
    else:  # a bad HFSDK_VIRTUAL_DEVICES is refused even when the workers run in-process
        default_virtual_devices()
    assets, trainer = run_assets(config, spec), config.trainer
    check_features(config, validates=bool(assets.val_files) and spec.has_policy)
    validating = trainer.val_every > 0 or trainer.val_before_train
    from hfsdk.core.trainer.input_checks import check_keep_best_source, check_prompt_length

    check_prompt_length(config)  # settings that would fail deep inside the run
    check_keep_best_source(config, bool(assets.val_files))
    main = getattr(config, spec.main_role)  # its paths, when set, are what the tokenizer is
    paths = {k: getattr(main, k, None) for k in ("tokenizer_path", "model_path")}
    key = next((f"{spec.main_role}.{k}" for k, v in paths.items() if v), "tokenizer path")
    tokenizer = load_tokenizer(assets.tokenizer_path, key)
    # Plugins' tools load here (a bad entry fails before Ray); the chat template renders them.
    tools = run_tool_schemas(config)
    prompts = prompts_for_run(
        PromptRequest(
            config=config,
            train_files=tuple(assets.train_files),
            val_files=tuple(assets.val_files) if validating else (),
            tokenizer=tokenizer,
            tokenizer_path=str(assets.tokenizer_path),
            builtin_tokenizer=not any(paths.values()),
            tools=tools,
        )
    )
    signal_configs = run_signals(config, spec, assets)
    from hfsdk.core.reward_scoring import build_reward_scorer

    # Built once per run: a missing scorer plugin or a bad function entry stops here.
    scorers = {r: build_reward_scorer(r, s) for r, s in signal_configs.items() if s.functions}
    prepared = PreparedRun(
        assets=assets,
        tokenizer=tokenizer,
        loader=prompts.train,
        val_loader=prompts.validation,
        signal_configs=signal_configs,
        tools=tools,
        reward_scorers=scorers,
        row_columns=tuple(prompts.row_columns),
    )
    run_preflight_checks(config, spec, prepared)
    return prepared


def run_preflight_checks(config: RunConfig, spec: AlgorithmSpec, prepared: PreparedRun) -> None:
    """Every registered preflight check, in name order; their warnings are logged."""
    registry = get_registry("preflight_checks")
    for name in registry:  # a check's bug (not its HfsdkError) is named with its plugin
        with plugin_code(registry[name].plugin, f"preflight check {name!r}"):
            warning = registry[name].impl(config, spec, prepared)
        if warning:
            logger.warning(warning)
