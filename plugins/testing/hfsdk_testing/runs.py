"""Comparing two training runs of one config: bitwise equal apart from wall-clock metrics."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

# Wall-clock measurements, and what is derived from them, differ between any two runs.
TIMED_METRIC_PREFIXES = (
    "timing/", "perf/", "sync/send_s", "sync/receive_s", "sync/rollout_wait_s", "plan/",
)  # fmt: skip


SMALL_GRPO = (
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "trainer.loggers=[jsonl]",
)
"""Overrides for a quick GRPO run of the default task whose runs are compared step by step."""


def untimed_metrics(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` without the wall-clock metrics (:data:`TIMED_METRIC_PREFIXES`)."""
    return {k: v for k, v in row.items() if not k.startswith(TIMED_METRIC_PREFIXES)}


def assert_runs_identical(
    run_a: Path, rows_a: Sequence[dict], run_b: Path, rows_b: Sequence[dict], step: int
) -> None:
    """Two runs of one config are bitwise identical: every untimed metric of every step
    (``==``; NaN only where the other is NaN) and the actor's HF weights at ``step``; and
    they trained (the first and last trained steps' gradient norms differ)."""
    from safetensors.torch import load_file

    for row_a, row_b in zip(rows_a, rows_b, strict=True):
        untimed_a, untimed_b = untimed_metrics(row_a), untimed_metrics(row_b)
        assert untimed_a.keys() == untimed_b.keys(), row_a["step"]
        for key, value in untimed_a.items():
            other = untimed_b[key]
            assert value == other or (value != value and other != other), (row_a["step"], key)
    path = Path("checkpoints") / f"step_{step}" / "actor_hf" / "model.safetensors"
    weights_a, weights_b = load_file(str(run_a / path)), load_file(str(run_b / path))
    assert weights_a.keys() == weights_b.keys()
    for name, tensor in weights_a.items():
        assert torch.equal(tensor, weights_b[name]), name
    # Trained rows only: a validation before training logs step 0 without a gradient norm.
    norms = [row["actor/grad_norm"] for row in rows_a if "actor/grad_norm" in row]
    assert len(norms) > 1 and norms[0] != norms[-1], norms  # the runs trained
