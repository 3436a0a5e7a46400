"""DPO trains on 3 pairs over 4 ranks as on one process: the dispatch's padding pair is no pair.

The training dispatch gives every rank 2 rows, so rank 3 holds only a repeat of pair 0
with its response mask zeroed (``without_padding_weight``). That pair has no label to
check, adds nothing to the loss (not log 2) and does not count in the pair metrics; the
loss's normaliser (the all-reduced sequence count) counts only the 3 real pairs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from hfsdk import load_tokenizer
from hfsdk.core.workers.futures import CollectSpec
from hfsdk.core.workers.protocols import collect_mean_metrics
from hfsdk_backend_common.testing.launch import run_gloo
from hfsdk_supervised_data import collate_preference_pairs, tokenize_preference_pairs
from hfsdk_tasks import DefaultTaskSpec, ensure_default_assets

sys.path.insert(0, str(Path(__file__).parent))
from padded_pairs_worker import train

WORLD = 4
ROWS = [
    {"prompt": "1 + 2 =", "chosen": "3", "rejected": "6 no"},
    {"prompt": "3 + 4 =", "chosen": "7 ok", "rejected": "10"},
    {"prompt": "5 + 1 =", "chosen": "6 ok ok", "rejected": "9 no no no"},
]


@pytest.mark.distributed
@pytest.mark.heavy
def test_three_pairs_on_four_ranks_train_like_one_process(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    spec = DefaultTaskSpec(
        hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2, warm_start_steps=60
    )
    model_dir = ensure_default_assets(spec, cache_dir=tmp_path_factory.mktemp("cache")).model_dir
    tokenizer = load_tokenizer(model_dir)
    batch = collate_preference_pairs(
        tokenize_preference_pairs(ROWS, tokenizer, use_template=False), tokenizer.pad_token_id
    )
    mask = batch["response_mask"].float()
    ref = -torch.rand(mask.shape, generator=torch.Generator().manual_seed(1)) * 3 * mask
    labels = torch.where(batch["chosen"].bool(), 1.0, -1.0)[:, None] * mask
    keys = ["input_ids", "attention_mask", "position_ids", "responses", "response_mask"]
    tensors = {k: batch[k] for k in keys} | {"old_log_probs": ref, "advantages": labels}
    # mini_batch_size 8: one optimizer step of every pair, on 1 process and on 4 ranks.
    inputs = {"config": {"model_path": str(model_dir), "mini_batch_size": 8,
                         "micro_batch_size": 2}, "batch": tensors, "steps": 2}  # fmt: skip
    expected = train(0, 1, inputs)
    here = [str(Path(__file__).parent)]
    results = run_gloo(WORLD, "padded_pairs_worker:train", {"inputs": inputs}, path=here)

    assert [r["rows"] for r in results] == [2, 2, 2, 2]  # rank 3: the padding pair only
    spec_ = CollectSpec(ranks=tuple(range(WORLD)))
    for step, want in enumerate(expected["metrics"]):
        got = collect_mean_metrics([r["metrics"][step] for r in results], spec_)
        for name in ("actor/pg_loss", "actor/dpo_accuracy", "actor/dpo_margin", "actor/grad_norm"):
            assert got[name] == pytest.approx(want[name], rel=1e-4, abs=1e-5), (step, name)
    for name, value in expected["weights"].items():
        torch.testing.assert_close(results[0]["weights"][name], value, atol=2e-5, rtol=1e-4)
