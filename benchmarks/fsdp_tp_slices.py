"""FSDP actor -> generation weights on 4 gloo processes: tensor-parallel slices vs full gathers.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fsdp_tp_slices.py            # ~80M params
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fsdp_tp_slices.py --layers 1 # quicker

A Llama model (random weights, float32) is sharded with the fsdp backend's
FSDP2 layout (``fully_shard`` per block, then the root; dim-0 chunks) over 4
ranks; each rank then obtains the weights it generates with:

(a) ``tp slices``: ``actor.rollout_layout.tp = tg``: one all-to-all per
    weight delivers only the rank's megatron tensor-parallel slice
    (``SliceExchange``), tg = 2 and 4;
(b) ``stream``: the tg = 1 path (``weight_sync: stream``): every FSDP unit is
    all-gathered whole, one at a time — also what a gather-then-reslice engine
    receives for any tg.

Per scheme: bytes received per rank (max over ranks; counted at the
collectives, and for (a) checked equal to ``expected_received_bytes``), wall
seconds (max over ranks, best of ``--repeats``) and peak extra memory beyond
the training shard (accounted by allocation; (b) holds one unit at a time
and, to generate, the full model). gloo over loopback TCP on a shared 2-core
machine: the seconds are indicative, the bytes exact.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import torch

MB = 2**20
WORLD = 4


def _model(layers: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=16000,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=layers,
        num_attention_heads=16,
        num_key_value_heads=8,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        return LlamaForCausalLM(config)


def bench_rank(rank: int, world: int, layers: int, repeats: int) -> dict[str, Any]:
    """One rank: shard the model, then time each scheme."""
    from hfsdk_backend_fsdp.sharding import (
        StreamStats,
        data_parallel,
        shard_model,
        stream_full_parameters,
    )
    from hfsdk_backend_fsdp.tp_exchange import SliceExchange, SliceStats
    from hfsdk_backend_fsdp.tp_slices import expected_received_bytes

    dp = data_parallel()
    model = shard_model(_model(layers), dp, "cpu")
    model.to_empty(device="cpu")
    torch.manual_seed(rank)
    with torch.no_grad():
        for param in model.parameters():
            param.to_local().normal_(0.0, 0.02)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    out: dict[str, Any] = {"numel": sum(_numel(s) for s in shapes.values())}
    for tg in (2, 4):
        exchange = SliceExchange(
            group=dp.group, world=world, rank=rank, tg=tg, dtype=torch.float32,
            device=torch.device("cpu"),
        )  # fmt: skip
        runs = []
        for _ in range(repeats):
            stats = SliceStats()
            shard = exchange.generation_shard(model, layers, 8, stats)
            del shard
            runs.append(stats)
        best = min(runs, key=lambda s: s.seconds)
        assert best.received_bytes == expected_received_bytes(shapes, world, tg, rank, 4)
        out[f"tp{tg}"] = {
            "bytes": best.received_bytes,
            "seconds": best.seconds,
            "peak": best.peak_extra_bytes,
        }
    runs = []
    for _ in range(repeats):
        stats = StreamStats()
        started = time.perf_counter()
        for _name, tensor in stream_full_parameters(model, dp, stats):
            tensor.sum()  # touch it, as a consumer copying it would
        runs.append((time.perf_counter() - started, stats))
    seconds, stats = min(runs, key=lambda r: r[0])
    out["stream"] = {
        "bytes": stats.received_bytes,
        "seconds": seconds,
        "peak": stats.peak_unit_bytes,
        "full": stats.full_bytes,
    }
    return out


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def main() -> None:
    """Run the benchmark and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from hfsdk_backend_common.testing.launch import run_gloo

    per_rank = run_gloo(
        WORLD,
        "fsdp_tp_slices:bench_rank",
        {"layers": args.layers, "repeats": args.repeats},
        path=[str(Path(__file__).parent)],
        timeout=3000,
    )
    n = per_rank[0]["numel"]
    print(
        f"Llama model: {n / 1e6:.0f}M parameters (float32, {n * 4 / MB:.0f} MiB), "
        f"{args.layers} layers, 16/8 heads; FSDP2 over {WORLD} gloo processes; "
        f"best of {args.repeats}\n"
    )
    print("| scheme | MiB recv/rank | s | peak extra MiB/rank | bytes vs (b) | time vs (b) |")
    print("|---|---|---|---|---|---|")
    rows = {
        "(a) tp slices, tg=2": "tp2",
        "(a) tp slices, tg=4": "tp4",
        "(b) stream full units (tg=1)": "stream",
    }
    base = {k: max(r["stream"][k] for r in per_rank) for k in ("bytes", "seconds")}
    for label, key in rows.items():
        got = {k: max(r[key][k] for r in per_rank) for k in ("bytes", "seconds", "peak")}
        if key == "stream":  # generating needs the whole model beside the shard
            got["peak"] = per_rank[0]["stream"]["full"]
        print(
            f"| {label} | {got['bytes'] / MB:.1f} | {got['seconds']:.2f} | "
            f"{got['peak'] / MB:.1f} | {got['bytes'] / base['bytes']:.2f} | "
            f"{got['seconds'] / base['seconds']:.2f} |"
        )


if __name__ == "__main__":
    main()
