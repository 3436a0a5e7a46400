"""TRL import: the launcher's process count (torchrun nodes x processes per node, accelerate's
config file) scales TRL's per-process batches; a count not readable here is a warning."""

from __future__ import annotations

from pathlib import Path

from hfsdk.core.config import resolve_run_config
from hfsdk_migration.importing import import_config, read_source

ENV = {"HOME": "/home/u"}
SCRIPT = (
    "train_grpo.py --per_device_train_batch_size 4 --num_generations 8 "
    "--gradient_accumulation_steps 2 --max_steps 100\n"
)


def _import(tmp_path: Path, launcher: str):  # type: ignore[no-untyped-def]
    script = tmp_path / "launch.sh"
    script.write_text(f"{launcher} {SCRIPT}")
    data, warnings = read_source("trl", str(script), [], env=ENV)
    result = import_config("trl", data, warnings=warnings)
    return result, resolve_run_config(None, result.config)


def test_torchrun_nodes_times_processes_per_node(tmp_path: Path) -> None:
    launcher = "torchrun --nnodes 2 --nproc_per_node 4 --node_rank 0 --master_addr 10.0.0.1"
    result, cfg = _import(tmp_path, launcher)
    assert (cfg.actor.mini_batch_size, cfg.data.batch_size) == (64, 8)
    pool = cfg.placement.pools["global"]
    assert (pool.devices, pool.nodes) == (8, 2)
    assert not result.warnings


def test_accelerate_config_file_gives_the_process_count(tmp_path: Path) -> None:
    (tmp_path / "zero3.yaml").write_text(
        "distributed_type: DEEPSPEED\nnum_machines: 1\nnum_processes: 8\n"
    )
    # The relative path is found beside the launch script.
    result, cfg = _import(tmp_path, "accelerate launch --config_file zero3.yaml")
    assert (cfg.actor.mini_batch_size, cfg.data.batch_size) == (64, 8)
    assert cfg.placement.pools["global"].devices == 8 and not result.warnings


def test_counts_not_readable_here_are_a_warning(tmp_path: Path) -> None:
    launchers = {
        "torchrun --nproc_per_node=gpu": "torchrun --nproc_per_node=gpu",
        "torchrun --nnodes 1:4 --nproc_per_node 8": "torchrun --nnodes=1:4",
        "accelerate launch --config_file missing.yaml": "--config_file missing.yaml",
        # Before: no warning; accelerate's default config on that machine gives the count.
        "accelerate launch --mixed_precision bf16": "`accelerate launch` without",
    }
    for launcher, named in launchers.items():
        result, cfg = _import(tmp_path, launcher)
        assert cfg.actor.mini_batch_size == 8  # per_device 4 x accumulation 2 x 1 process
        [warning] = [w for w in result.warnings if "process count" in w]
        assert named in warning and "batch sizes assume 1 process" in warning
        assert "\n" not in warning
