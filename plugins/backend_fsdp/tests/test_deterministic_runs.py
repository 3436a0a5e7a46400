"""``trainer.deterministic`` with an FSDP actor sharded over two Ray ranks: bitwise repeats."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_testing import assert_runs_identical

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.heavy]

ARGS = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=2",
    "placement.pools.global.devices=2",
    "trainer.executor=ray",
    "trainer.loggers=[jsonl]",
    "trainer.total_steps=2",
    "trainer.deterministic=true",
]


def test_two_runs_of_a_two_rank_fsdp_actor_are_bitwise_identical(tmp_path: Path) -> None:
    runs = [
        Trainer(load_run_config("grpo", None, ARGS), tmp_path / name, quiet=True).fit()
        for name in ("a", "b")
    ]
    assert_runs_identical(tmp_path / "a", runs[0], tmp_path / "b", runs[1], 2)
