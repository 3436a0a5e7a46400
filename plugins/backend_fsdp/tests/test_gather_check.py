"""The gathered live module (``weight_sync: gather``) is checked against its shards.

Quick: the arithmetic (bit sums of uneven, cast shards add up to the gathered tensor's) and
the comparison in one process. Two gloo ranks: a clean gather reports ``sync/verified`` and
``gather_drop`` is caught on every rank with one line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common import bit_sum
from hfsdk_backend_fsdp.sharding import DataParallel, check_gathered

sys.path.insert(0, str(Path(__file__).parent))
from gloo_ranks import run_ranks

WORKER = Path(__file__).with_name("gather_check_worker.py")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bit_sums_of_uneven_cast_shards_add_up_to_the_gathered_tensors(
    dtype: torch.dtype,
) -> None:
    full = torch.randn(7, 5, generator=torch.Generator().manual_seed(3)) * 100
    shards = torch.tensor_split(full, 3)  # 3, 2, 2 rows: uneven
    assert [s.shape[0] for s in shards] == [3, 2, 2]
    gathered = torch.cat([s.to(dtype) for s in shards])  # what FSDP gathers: cast, then joined
    assert sum(bit_sum(s.to(dtype)) for s in shards) == bit_sum(gathered)
    # FSDP2's zero padding of the last shard would add nothing either.
    assert bit_sum(torch.cat([shards[-1].to(dtype), torch.zeros(1, 5, dtype=dtype)])) == bit_sum(
        shards[-1].to(dtype)
    )
    # Summed before the cast, the shards would not match a bfloat16 gather.
    if dtype == torch.bfloat16:
        assert sum(bit_sum(s) for s in shards) != bit_sum(gathered)


def test_a_gathered_parameter_unlike_its_shards_is_named() -> None:
    module = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Linear(3, 2))
    sums = {
        n: sum(bit_sum(s) for s in torch.tensor_split(p.detach(), 2))
        for n, p in module.named_parameters()
    }
    alone = DataParallel()
    assert check_gathered(module, sums, alone, torch.device("cpu")) is None
    line = check_gathered(module, sums, alone, torch.device("cpu"), corrupt="1.weight")
    assert line is not None and "\n" not in line
    assert "1 of 4 gathered parameter(s)" in line and "'1.weight'" in line
    assert check_gathered(module, {**sums, "2.weight": 0}, alone, torch.device("cpu"))


@pytest.mark.heavy  # about 40 s on the shared machine (two processes)
@pytest.mark.distributed
def test_a_gather_is_verified_on_every_rank_and_a_corrupted_one_caught(
    model_dir: Path, make_prompts: Callable[..., Batch], tmp_path: Path
) -> None:
    prompts = make_prompts(["3 + 5 =", "1 + 2 =", "9 + 9 =", "4 + 0 ="])
    torch.save(
        {
            "config": {"model_path": str(model_dir), "dtype": "bfloat16"},
            "prompts": {k: prompts[k] for k in ("input_ids", "attention_mask")},
        },
        tmp_path / "inputs.pt",
    )
    run_ranks(WORKER, tmp_path, env={"HFSDK_FAULT_INJECT": "gather_drop:2"})
    results = [torch.load(tmp_path / f"gather{r}.pt", weights_only=False) for r in range(2)]
    # Odd sizes: rank 1 holds 2 of 5 rows and no part of the 1-row weight; the bfloat16
    # gather still matches the sums of the float32 shards cast to bfloat16, on both ranks.
    assert results[0]["uneven"]["local_rows"] == {
        "0.weight": 3,
        "0.bias": 3,
        "1.weight": 1,
        "1.bias": 1,
    }
    assert results[1]["uneven"]["local_rows"] == {
        "0.weight": 2,
        "0.bias": 2,
        "1.weight": 0,
        "1.bias": 0,
    }
    for result in results:
        assert result["uneven"]["dtypes"] == {"torch.bfloat16"}
        assert result["uneven"]["clean"] is None
        assert "'0.weight'" in result["uneven"]["faulty"]
    for result in results:
        assert result["clean"]["sync/verified"] == 1.0
        assert result["clean"]["sync/gathered_verified"] == len(result["full_shapes"])
        error = result["error"]
        assert error and "\n" not in error  # the corrupted gather, caught on both ranks
        assert "weights version 0" in error and "'model.embed_tokens.weight'" in error
    assert results[0]["error"] == results[1]["error"]
