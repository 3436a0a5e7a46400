"""``trainer.deterministic`` with an FSDP actor sharded over two Ray ranks: bitwise repeats."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

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
    from safetensors.torch import load_file

    runs = [
        Trainer(load_run_config("grpo", None, ARGS), tmp_path / name, quiet=True).fit()
        for name in ("a", "b")
    ]
    for a, b in zip(*runs, strict=True):
        keys = [k for k in a if not k.startswith(("timing/", "perf/"))]
        assert keys == [k for k in b if not k.startswith(("timing/", "perf/"))]
        assert all(a[k] == b[k] for k in keys), [k for k in keys if a[k] != b[k]]
    weights = [
        load_file(
            str(tmp_path / name / "checkpoints" / "step_2" / "actor_hf" / "model.safetensors")
        )
        for name in ("a", "b")
    ]
    assert all(torch.equal(weights[0][n], weights[1][n]) for n in weights[0])
    assert runs[0][0]["actor/grad_norm"] != runs[0][1]["actor/grad_norm"]  # it trained
