"""Hook implementations that ship with the core (always registered).

Entries that belong to no single algorithm or backend live here.
"""

from __future__ import annotations

import hfsdk
from hfsdk.hookspecs import Register


@hfsdk.hookimpl
def hfsdk_register_kl_estimators(register: Register) -> None:
    """Register the KL estimators (``k1``, ``abs``, ``k2``, ``k3``, ``k3_clamped``, ...)."""
    from hfsdk.core.maths.kl_estimators import KL_ESTIMATORS

    for name, fn in KL_ESTIMATORS.items():
        register(name, fn)


@hfsdk.hookimpl
def hfsdk_register_policy_losses(register: Register) -> None:
    """Register ``ppo_clip`` (asymmetric clip ratios, dual clip) and ``reinforce``."""
    from hfsdk.core.maths.policy_losses import (
        PPOClipConfig,
        ReinforceConfig,
        ppo_clip_loss,
        reinforce_loss,
    )

    register("ppo_clip", ppo_clip_loss, config_cls=PPOClipConfig)
    register("reinforce", reinforce_loss, config_cls=ReinforceConfig)


@hfsdk.hookimpl
def hfsdk_register_rollout_corrections(register: Register) -> None:
    """Register ``tis``, ``mis``, ``icepop``, ``geo_rs``, ``k3_rs``, ``trust_region`` and
    ``dsv32_mask``."""
    from hfsdk.core.maths.rollout_corrections import BUILTIN_CORRECTIONS

    for name, (fn, config_cls) in BUILTIN_CORRECTIONS.items():
        register(name, fn, config_cls=config_cls)


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register the ``tool_use`` task's."""
    from hfsdk.core.agents.tool_use import task as tool_use

    register(tool_use.REWARD_FUNCTION_NAME, tool_use.tool_use_reward)


@hfsdk.hookimpl
def hfsdk_register_transfer_protocols(register: Register) -> None:
    """Register the built-in transfer protocols (``one_to_all`` ... ``pp_as_dp``)."""
    from hfsdk.core.workers.protocols.builtins import BUILTIN_PROTOCOLS

    for name, protocol in BUILTIN_PROTOCOLS.items():
        register(name, protocol, doc=protocol.doc)


@hfsdk.hookimpl
def hfsdk_register_tools(register: Register) -> None:
    """Register ``python`` (a sandboxed snippet runner) and ``add`` (the tool_use task's)."""
    from hfsdk.core.agents.code_tool import python_tool
    from hfsdk.core.agents.tool_use.task import add

    register("python", python_tool)
    register("add", add)


@hfsdk.hookimpl
def hfsdk_register_agent_loops(register: Register) -> None:
    """Register ``tool_loop``: generate → tool calls → tools → generate, until done."""
    from hfsdk.core.agents.loops import ToolLoop

    register("tool_loop", ToolLoop)


@hfsdk.hookimpl
def hfsdk_register_tool_parsers(register: Register) -> None:
    """Register ``hermes`` (``<tool_call>{json}</tool_call>``) and ``llama_function``."""
    from hfsdk.core.agents.parsers import BUILTIN_PARSERS, CALL_END_MARKERS

    for name, parser in BUILTIN_PARSERS.items():
        register(name, parser, end_marker=CALL_END_MARKERS[name])


@hfsdk.hookimpl
def hfsdk_register_config_sections(register: Register) -> None:
    """Register the core's sections ``trainer``, ``data``, ``placement`` and
    ``rollout_correction``."""
    from hfsdk.core.data.data_config import DataConfig
    from hfsdk.core.maths.rollout_correction_config import RolloutCorrectionConfig
    from hfsdk.core.trainer.placement_config import PlacementConfig
    from hfsdk.core.trainer.trainer_config import TrainerConfig

    register("trainer", TrainerConfig)
    register("data", DataConfig)
    register("placement", PlacementConfig)
    register("rollout_correction", RolloutCorrectionConfig)


@hfsdk.hookimpl
def hfsdk_register_step_observers(register: Register) -> None:
    """Register ``faults`` (``HFSDK_FAULT_INJECT``) and ``rollout_dump``
    (``trainer.rollout_dump``)."""
    from hfsdk.core.trainer.faults import fault_observer
    from hfsdk.core.trainer.rollout_dump import rollout_dump_observer

    register("faults", fault_observer)
    register("rollout_dump", rollout_dump_observer)


@hfsdk.hookimpl
def hfsdk_register_tasks(register: Register) -> None:
    """Register ``tool_use`` (multi-turn addition with a calculator tool, docs/agents.md).

    It moves with the agents to their plugin, which registers it there.
    """
    from hfsdk.core.agents.tool_use.build import ensure_tool_use_assets, tool_use_preset
    from hfsdk.core.task_spec import Task, TaskAssets

    def assets(model: str = "warm", data: str = "prompts") -> TaskAssets:
        root = ensure_tool_use_assets()
        return TaskAssets(
            model_dir=root / "model",
            tokenizer_dir=root / "model",
            train_files=(str(root / "train.jsonl"),),
            val_files=(str(root / "val.jsonl"),),
            root=root,
        )

    register(
        "tool_use",
        Task(
            summary="multi-turn addition with a calculator tool (docs/agents.md)",
            assets=assets,
            settings=lambda: tool_use_preset(ensure_tool_use_assets()),
            signals={"reward": ("tool_use",)},
        ),
    )
