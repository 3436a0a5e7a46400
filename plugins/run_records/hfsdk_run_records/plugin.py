"""Hook implementations of the run records: the dump and shared-directory observers, the
dumped generations of ``trainer.mode: train_only``, and the ``replay``/``export`` commands."""

from __future__ import annotations

from typing import Any

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_step_observers(register: Register) -> None:
    """Register ``rollout_dump`` (``trainer.rollout_dump``, ``trainer.mode: rollout_only``),
    ``shared_run_dir`` (a multi-node run's directory must be seen by every worker node) and
    ``run_info`` (each start's versions and checksums, in ``run_info.jsonl``)."""
    from hfsdk_run_records.rollout_dump import rollout_dump_observer
    from hfsdk_run_records.run_info import run_info_observer
    from hfsdk_run_records.shared_run_dir import shared_run_dir_observer

    register("rollout_dump", rollout_dump_observer)
    register("run_info", run_info_observer)
    register("shared_run_dir", shared_run_dir_observer)


@hfsdk.hookimpl
def hfsdk_recorded_generations(config: Any) -> Any:
    """``trainer.mode: train_only``: the generations ``trainer.rollouts_from`` dumped."""
    from hfsdk_run_records.step_dump import DumpedGenerations

    return DumpedGenerations(config.trainer.rollouts_from)


@hfsdk.hookimpl
def hfsdk_register_commands(cli: Any) -> None:
    """Add ``hfsdk replay`` and ``hfsdk export``."""
    from hfsdk_run_records.cli.export_command import export
    from hfsdk_run_records.cli.replay_command import replay

    for command in (export, replay):
        cli.add_command(command)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``recorded_generations`` (a refusal: a ``train_only`` run whose settings the
    dumped rollouts do not fit)."""
    from hfsdk_run_records.train_only_check import check_recorded_generations

    register("recorded_generations", check_recorded_generations)
