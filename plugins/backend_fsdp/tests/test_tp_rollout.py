"""The fsdp actor generates at ``actor.rollout_layout.tp = tg`` on slices of its FSDP shards.

On 2 gloo ranks (one replica at tg=2) and 4 (two replicas at tg=2): greedy
responses equal HF ``generate`` on the same weights before and after an
``update_actor`` step (a stale slice fails the second check), every rank
receives exactly the bytes of the formula, about 1/tg of what FSDP's
all-gather of the full weights receives, and holds about one layer beyond
its generation slice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common.testing.launch import run_gloo
from hfsdk_backend_fsdp.tp_slices import (
    expected_received_bytes,
    full_gather_bytes,
    region,
    tp_index,
)
from hfsdk_testing import hf_greedy_responses, save_tiny_llama

HERE = str(Path(__file__).parent)
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 =", "7 + 1 =", "2 + 2 =", "5 =", "6 + 3 ="]
SETUPS = [(2, 2), (4, 2)]  # (world, tg)


def _hf_greedy(model: Any, prompts: Batch, width: int, eos: int, pad: int) -> torch.Tensor:
    ids, mask = prompts["input_ids"], prompts["attention_mask"]
    return hf_greedy_responses(model, ids, mask, width=width, eos=eos, pad=pad)


def _save_tied_model(directory: Path, tokenizer_dir: Path) -> Path:
    """A random tiny Llama with tied embeddings and an odd vocabulary (padded for tg=2)."""
    from hfsdk import load_tokenizer

    return save_tiny_llama(
        directory,
        load_tokenizer(tokenizer_dir),
        hidden_size=32,
        intermediate_size=64,
        num_heads=4,
        num_kv_heads=2,
        extra_vocab=1,
        tied=True,
        init_std=0.3,  # peaked logits: no near-ties in greedy decoding
    )


@pytest.fixture(scope="module")
def tied_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save_tied_model(tmp_path_factory.mktemp("tied") / "model", model_dir)


@pytest.fixture(scope="module")
def runs(
    model_dir: Path, tied_dir: Path, make_prompts: Callable[..., Batch]
) -> dict[tuple[int, int] | str, Any]:
    prompts = make_prompts(PROMPTS)
    tensors = {k: prompts[k] for k in ("input_ids", "attention_mask")}
    out: dict[tuple[int, int] | str, Any] = {}
    for world, tg in SETUPS:
        scenarios = [{"path": str(model_dir), "prompts": tensors, "tg": tg}]
        if world == 2:  # the tied, odd-vocabulary model and bfloat16 ride along
            scenarios.append({"path": str(tied_dir), "prompts": tensors, "tg": tg})
            scenarios.append(
                {"path": str(model_dir), "prompts": tensors, "tg": tg, "dtype": "bfloat16"}
            )
        results = run_gloo(
            world, "tp_rollout_worker:run_many", {"scenarios": scenarios}, path=[HERE],
            timeout=240,
        )  # fmt: skip
        out[(world, tg)] = [r[0] for r in results]
        if world == 2:
            out["tied"] = [r[1] for r in results]
            out["bfloat16"] = [r[2] for r in results]
    return out


@pytest.mark.distributed
@pytest.mark.parametrize("setup", [*SETUPS, "tied"], ids=lambda s: "world{}-tg{}".format(*s)
                         if isinstance(s, tuple) else "tied-odd-vocab-world2-tg2")  # fmt: skip
def test_greedy_equals_hf_before_and_after_update_actor(
    runs: dict, setup: Any, model_dir: Path, tied_dir: Path, make_prompts: Callable[..., Batch]
) -> None:
    from transformers import AutoModelForCausalLM

    from hfsdk import load_tokenizer

    outcomes = runs[setup]
    if setup == "tied":
        model_dir = tied_dir
    tokenizer = load_tokenizer(model_dir)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    prompts = make_prompts(PROMPTS)
    first = torch.cat([o["first"] for o in outcomes])
    second = torch.cat([o["second"] for o in outcomes])
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    assert torch.equal(first, _hf_greedy(model, prompts, 6, eos, pad))
    model.load_state_dict(outcomes[0]["state"], strict=False)  # tied: no lm_head entry
    after = _hf_greedy(model, prompts, 6, eos, pad)
    assert not torch.equal(after, first), "the update did not change greedy output"
    assert torch.equal(second, after)


@pytest.mark.distributed
@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: "world{}-tg{}".format(*s))
def test_each_rank_receives_the_formula_bytes_about_one_tg_of_a_full_gather(
    runs: dict, setup: tuple[int, int]
) -> None:
    world, tg = setup
    outcomes = runs[setup]
    shapes = outcomes[0]["shapes"]
    layer_params = {n: s for n, s in shapes.items() if n.startswith("model.layers.0.")}
    for rank, outcome in enumerate(outcomes):
        stats = outcome["stats"]
        expected = expected_received_bytes(shapes, world, tg, rank, 4)
        assert stats.received_bytes == expected
        assert outcome["second_stats"].received_bytes == expected
        full = full_gather_bytes(shapes, world, rank, 4)
        # At most 1/tg of every weight, less what the rank already holds; FSDP gathers
        # (N-1)/N of each: the ratio is below 1/tg * N/(N-1) (norms, ~0.3%, aside).
        assert 0 < stats.received_bytes <= full / tg * world / (world - 1) * 1.01
        # The generation slice: 1/tg of every split weight (vocabulary padded), norms whole.
        slice_bytes = {
            name: 4 * region(name, shape, tg, tp_index(rank, world, tg)).rows * (
                shape[1] // tg if name.endswith(("o_proj.weight", "down_proj.weight"))
                else (shape[1] if len(shape) > 1 else 1)
            )
            for name, shape in shapes.items()
        }  # fmt: skip
        assert stats.generation_bytes == sum(slice_bytes.values())
        # Beyond the slice a rank holds about one layer's slices (send buffer, q/k/v).
        one_layer = sum(slice_bytes[n] for n in layer_params)
        assert stats.generation_bytes < stats.peak_extra_bytes
        assert stats.peak_extra_bytes <= stats.generation_bytes + one_layer
        metrics = outcome["metrics"]  # maxed over the ranks
        assert metrics["perf/reshard_bytes"] == max(o["stats"].received_bytes for o in outcomes)
        assert metrics["perf/reshard_peak_extra_bytes"] >= stats.peak_extra_bytes
        assert metrics["timing/reshard_s"] > 0


@pytest.mark.heavy
@pytest.mark.distributed
def test_a_grpo_run_generates_at_rollout_tp2_through_ray(model_dir: Path, tmp_path: Path) -> None:
    """The worker picks the sliced rollout for ``actor.rollout_layout.tp=2`` and logs its cost."""
    import json
    import os
    import subprocess
    import sys

    from transformers import AutoConfig, AutoModelForCausalLM

    run_dir = tmp_path / "run"
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("hfsdk")),
            "run", "--algo", "grpo", "--run-dir", str(run_dir), "--quiet",
            f"actor.model_path={model_dir}",
            "actor.rollout_layout.tp=2",
            "placement.pools.global.devices=2",
            "trainer.total_steps=2",
            "data.batch_size=4",
            "algorithm.n_samples_per_prompt=2",
            "actor.mini_batch_size=4",
            "actor.micro_batch_size=2",
        ],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(model_dir)))
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    expected = max(expected_received_bytes(shapes, 2, 2, rank, 4) for rank in range(2))
    assert len(rows) == 2
    for row in rows:
        assert row["perf/reshard_bytes"] == expected  # streaming the full model differs
        assert row["perf/reshard_bytes"] < full_gather_bytes(shapes, 2, 0, 4) / 2


@pytest.mark.distributed
def test_bfloat16_slices_travel_in_the_compute_dtype(runs: dict) -> None:
    """Mixed precision: float32 master shards, the slices move (and decode) in bfloat16."""
    outcomes = runs["bfloat16"]
    shapes = outcomes[0]["shapes"]
    for rank, outcome in enumerate(outcomes):
        assert outcome["stats"].received_bytes == expected_received_bytes(shapes, 2, 2, rank, 2)
        responses = outcome["first"]
        assert responses.shape == (len(PROMPTS) // 2, 6) and responses.dtype == torch.long
