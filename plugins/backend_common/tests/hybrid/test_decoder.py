"""Greedy decoding at the generation layout equals HF's greedy on the same weights.

Pairs with pg = 2 decode across two generation pipeline stages (hidden states
sent stage to stage, the token broadcast from the last stage).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk_backend_common.testing.launch import run_gloo

HERE = str(Path(__file__).parent)
PAIRS = [(1, 2, 1, 1), (2, 2, 1, 2), (1, 4, 1, 2), (2, 1, 1, 1), (2, 2, 2, 1), (2, 1, 2, 1),
         (4, 1, 2, 1), (2, 2, 2, 2), (4, 1, 4, 1)]  # fmt: skip


@pytest.fixture(scope="module")
def outcomes() -> list[dict]:
    return run_gloo(4, "decode_worker:run_all", path=[HERE], timeout=300)


@pytest.mark.distributed
@pytest.mark.parametrize("pair", PAIRS, ids=lambda c: "p{}t{}->pg{}tg{}".format(*c))
def test_greedy_after_train_to_generate_equals_hf(outcomes: list[dict], pair) -> None:
    for rank, per_rank in enumerate(outcomes):
        before, after = per_rank[pair]["results"]
        assert torch.equal(before["ours"], before["hf"]), (rank, pair)
        # After an update the next generation uses the new weights (fails on stale ones).
        assert not torch.equal(before["hf"], after["hf"])
        assert torch.equal(after["ours"], after["hf"]), (rank, pair)


@pytest.mark.distributed
@pytest.mark.parametrize("pair", PAIRS, ids=lambda c: "p{}t{}->pg{}tg{}".format(*c))
def test_sampling_agrees_inside_a_generation_replica(outcomes: list[dict], pair) -> None:
    # Every rank seeds its generator differently: only the deciding rank's draw may count.
    for per_rank in outcomes:
        mine = per_rank[pair]["results"][0]["sampled"]
        for other in (*per_rank[pair]["tp_ranks"], *per_rank[pair]["pp_ranks"]):
            assert torch.equal(outcomes[other][pair]["results"][0]["sampled"], mine)
        assert mine.max() < 96
