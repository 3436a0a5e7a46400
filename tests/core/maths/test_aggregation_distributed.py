"""Aggregation invariance over two gloo ranks against the single-process full batch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from hfsdk.core.maths.aggregation import LOSS_AGG_MODES, LossAggregation, aggregate_loss

# The worker lives in a plain module on sys.path so spawned processes can unpickle it by name.
sys.path.insert(0, str(Path(__file__).parent))
import aggregation_worker as worker


@pytest.mark.distributed
def test_two_ranks_match_full_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    import torch.multiprocessing as mp

    init_file = tmp_path / "init"
    mp.spawn(worker.run, args=(2, str(init_file), str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]

    inputs, targets, mask = worker.make_batch()
    for mode in LOSS_AGG_MODES:
        model = worker.make_model()
        agg = LossAggregation(mode=mode, norm_length=worker.LENGTH)
        full = aggregate_loss(worker.loss_matrix(model, inputs, targets), mask, agg)
        full.backward()
        full_grads = worker.grads(model)
        for result in ranks:  # every rank ends with the same reduced values
            for label in ("sum", "avg"):
                torch.testing.assert_close(result[mode][f"loss_{label}"], full.detach())
                for got, want in zip(result[mode][f"grads_{label}"], full_grads, strict=True):
                    torch.testing.assert_close(got, want)
        # Sanity: per-rank normalisation would be wrong here (the halves differ in size),
        # so the match above is not an accident of the data.
        assert abs(ranks[0][mode]["naive_loss"].item() - full.item()) > 1e-3
