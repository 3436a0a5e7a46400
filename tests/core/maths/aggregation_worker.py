"""Worker of test_aggregation_distributed.py (a plain module so spawn can pickle it).

Each rank takes half of a fixed batch, aggregates a per-token loss of a small
linear model with global counts and saves its summed loss and gradients.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from hfsdk.core.maths.aggregation import (
    LOSS_AGG_MODES,
    LossAggregation,
    aggregate_loss,
    global_counts,
)

BATCH, LENGTH, FEATURES = 6, 5, 3
# Response lengths chosen so the two halves differ in valid tokens (7 vs 9) and valid
# sequences (3 vs 2, one row fully masked): per-rank normalisation would be wrong in every mode.
LENGTHS = (1, 2, 4, 5, 0, 4)


def make_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The full batch: inputs (B, T, F), targets (B, T), response mask (B, T)."""
    gen = torch.Generator().manual_seed(0)
    inputs = torch.randn(BATCH, LENGTH, FEATURES, generator=gen, dtype=torch.float64)
    targets = torch.randn(BATCH, LENGTH, generator=gen, dtype=torch.float64)
    mask = torch.arange(LENGTH).unsqueeze(0) < torch.tensor(LENGTHS).unsqueeze(1)
    return inputs, targets, mask


def make_model() -> torch.nn.Linear:
    """The same small linear model on every rank."""
    torch.manual_seed(0)
    return torch.nn.Linear(FEATURES, 1, dtype=torch.float64)


def loss_matrix(
    model: torch.nn.Linear, inputs: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Per-token squared error, (B, T)."""
    return (model(inputs).squeeze(-1) - targets) ** 2


def grads(model: torch.nn.Linear) -> list[torch.Tensor]:
    """Copies of the model's gradients."""
    return [p.grad.detach().clone() for p in model.parameters()]


def run(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    """One rank: per mode, the all-reduced loss and gradients, with and without dp_size."""
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size
    )
    inputs, targets, mask = make_batch()
    rows = slice(rank * BATCH // world_size, (rank + 1) * BATCH // world_size)
    inputs, targets, mask = inputs[rows], targets[rows], mask[rows]
    counts = global_counts(mask)
    results: dict[str, dict[str, object]] = {}
    for mode in LOSS_AGG_MODES:
        entry: dict[str, object] = {}
        for label, dp_size, op in (("sum", 1, dist.ReduceOp.SUM), ("avg", world_size, None)):
            model = make_model()
            agg = LossAggregation.from_counts(mode, counts, norm_length=LENGTH, dp_size=dp_size)
            loss = aggregate_loss(loss_matrix(model, inputs, targets), mask, agg)
            loss.backward()
            reduced = loss.detach().clone()
            dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
            gradients = grads(model)
            for g in gradients:
                # DDP-style averaging for the dp_size run, plain sum otherwise.
                dist.all_reduce(g, op=op or dist.ReduceOp.SUM)
                if op is None:
                    g /= world_size
            entry[f"loss_{label}"] = reduced / (world_size if op is None else 1)
            entry[f"grads_{label}"] = gradients
        # What naive per-rank normalisation (local counts, averaged over ranks) would give.
        local = LossAggregation(mode=mode, norm_length=LENGTH)
        naive = aggregate_loss(loss_matrix(make_model(), inputs, targets), mask, local)
        dist.all_reduce(naive.detach_(), op=dist.ReduceOp.SUM)
        entry["naive_loss"] = naive / world_size
        results[mode] = entry
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()
