"""One rank of the two-rank score-model check in ``test_score_model.py`` (run as a script).

Builds the reward model with the test's settings, trains it on this rank's half of
the pairs (consecutive rows, as the training dispatch gives them) and saves its
metrics (this rank's share: the worker group averages them over ranks) and, on rank 0,
the full weights after the step.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from gloo_ranks import join_group  # beside this script, on its sys.path
from test_score_model import _engine, _pair_loss

import hfsdk


def main() -> None:
    """Train this rank's share of the pairs once and save what the test compares."""
    args = join_group()
    inputs = torch.load(args.inputs, weights_only=False)
    engine = _engine(inputs["model_dir"], micro=inputs["micro"])
    batch = inputs["batch"]
    share = len(batch) // args.world
    mine = batch.index(range(args.rank * share, (args.rank + 1) * share))
    mine.meta[hfsdk.ROW_GROUP] = 2
    metrics = engine.update_score_model(mine, _pair_loss)
    # full_tensor is a collective: every rank gathers each weight.
    weights = {name: p.full_tensor().detach() for name, p in engine.module.named_parameters()}
    saved = {"metrics": metrics, "weights": weights if args.rank == 0 else {}}
    torch.save(saved, args.out / f"rank{args.rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
