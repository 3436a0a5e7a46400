"""Train -> generate resharding on 8 gloo processes: micro-DP vs two common alternatives.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/reshard.py            # ~127M params, bf16
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/reshard.py --layers 2 # quicker

A Llama-shaped model (synthetic weights, megatron-core parameter layout) is
sharded in its training layout (p, t, d); each rank then builds its
generation shard for (pg, tg, dg, d) three ways:

(a) ``micro-DP``: hfsdk's 3D-HybridEngine (broadcasts inside the dg ranks of
    a micro-DP group only, straight into the generation tensors); also run
    with ``lend_training`` (``micro-DP, lent``: each training tensor's storage
    released once its slice is in the generation tensor, restored after; run
    alone, since the others read the training shard);
(b) ``gather-all``: every rank gathers the full model over its training
    replica, reslices its generation shard and frees the rest (DeepSpeed-Chat /
    NeMo-Aligner style);
(c) ``rollout copy``: a separate generation copy is kept on every rank and
    refreshed by gathering each full weight on rank 0 and broadcasting it to
    all ranks, each copying its slice (OpenRLHF style).

Per scheme: bytes received per rank (max over ranks; what each rank's
collectives delivered to it, counted), wall seconds of the transition (max over
ranks), peak extra memory per rank beyond the training shard (max over ranks,
accounted by allocation; the rollout copy of (c) is held all the time).
Every scheme's generation shard is checked equal to (a)'s. gloo over loopback
TCP on a shared 2-core machine: the seconds are indicative, the bytes exact.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from hfsdk_backend_common.hybrid.accounting import uniform_transition_bytes
from hfsdk_backend_common.hybrid.groups import create_groups
from hfsdk_backend_common.hybrid.layout import (
    GenLayout,
    HeadShape,
    TrainLayout,
    generation_layout,
    validate,
)
from hfsdk_backend_common.hybrid.llama_format import LlamaShape, llama_specs, tp_slice
from hfsdk_backend_common.hybrid.reshard import HybridEngine
from hfsdk_backend_common.testing.synthetic import synthetic_shard

LAYOUTS = [((1, 4, 2), (1, 2)), ((2, 4, 1), (1, 2)), ((1, 8, 1), (1, 2))]
MB = 2**20


def _shape(layers: int) -> LlamaShape:
    return LlamaShape(
        vocab_size=16000,
        hidden_size=1024,
        intermediate_size=2816,
        num_layers=layers,
        num_heads=16,
        num_kv_heads=8,
    )


def _nbytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _micro_dp(engine: HybridEngine, shard: dict) -> tuple[dict, dict]:
    gen = engine.to_generation(shard)
    s = engine.stats
    return gen, {
        "bytes": s.bytes_received,
        "seconds": s.seconds,
        "peak": s.peak_extra_bytes,
        "held": s.held_extra_bytes,
    }


def _gather_all(full_engine: HybridEngine, train, gen_layout, rank) -> tuple:
    """(b): the full model on every rank, then the generation slices, then free the full."""
    started = time.perf_counter()
    full = full_engine.to_generation(full_engine.training)
    st = full_engine.stats
    pl_tp = train.coords(rank)[1] // (train.t // gen_layout.tg)
    a = train.p // gen_layout.pg
    gen_stage = train.coords(rank)[0] // a
    out = {}
    for spec in full_engine.specs:
        if spec.stage(train.p, full_engine.num_layers) // a == gen_stage:
            out[spec.name] = tp_slice(full[spec.name], spec, gen_layout.tg, pl_tp)
    peak = st.peak_extra_bytes + _nbytes(out.values())
    full_engine.to_training()
    seconds = time.perf_counter() - started
    return out, {"bytes": st.bytes_received, "seconds": seconds, "peak": peak}


def _rollout_copy(specs, train, gen_layout, shard, rank, copy, num_layers) -> dict:
    """(c): gather each full weight on the replica's first rank, broadcast it to all ranks."""
    started = time.perf_counter()
    i, j, r = train.coords(rank)
    root = train.rank(0, 0, 0)
    received = 0
    largest = 0
    b = train.t // gen_layout.tg
    for spec in specs:
        stage = spec.stage(train.p, num_layers)
        full = torch.empty(spec.shape, dtype=next(iter(shard.values())).dtype)
        largest = max(largest, _nbytes([full]))
        if r == 0:
            # Gather the t slices of the holding stage on the root (point to point).
            for tp in range(train.t):
                src = train.rank(stage, tp, 0)
                if spec.split is None and tp > 0:
                    break
                if rank in (src, root):
                    piece = (
                        shard[spec.name]
                        if rank == src
                        else torch.empty(spec.shard_shape(train.t), dtype=full.dtype)
                    )
                    if src != root:
                        if rank == src:
                            dist.send(piece, dst=root)
                        else:
                            dist.recv(piece, src=src)
                            received += _nbytes([piece])
                    if rank == root:
                        if spec.split is None:
                            full.copy_(piece)
                        else:
                            _place_slice(full, spec, train.t, tp, piece)
        dist.broadcast(full, src=root)
        if rank != root:
            received += _nbytes([full])
        gen_stage = i // (train.p // gen_layout.pg)
        if stage // (train.p // gen_layout.pg) == gen_stage:
            copy[spec.name].copy_(tp_slice(full, spec, gen_layout.tg, j // b))
        del full
    seconds = time.perf_counter() - started
    return {"bytes": received, "seconds": seconds, "peak": _nbytes(copy.values()) + largest}


def _place_slice(full: torch.Tensor, spec, size: int, index: int, piece: torch.Tensor) -> None:
    offset_full = offset_piece = 0
    for part in spec.part_sizes:
        width = part // size
        full.narrow(spec.split, offset_full + index * width, width).copy_(
            piece.narrow(spec.split, offset_piece, width)
        )
        offset_full += part
        offset_piece += width


def bench_rank(rank: int, world: int, layers: int, repeats: int) -> dict:
    """Run the three schemes for every layout on this rank; return its measurements."""
    shape = _shape(layers)
    specs = llama_specs(shape)
    results = {}
    for (p, t, d), (pg, tg) in LAYOUTS:
        train = TrainLayout(p, t, d)
        gen = generation_layout(train, tp=tg, pp=pg)
        validate(train, gen, HeadShape(num_layers=layers, num_heads=16, num_kv_heads=8))
        groups = create_groups(train, gen)
        full_layout = GenLayout(1, 1, p * t)
        full_groups = create_groups(train, full_layout)
        engine = HybridEngine(
            train=train, gen=gen, specs=specs, num_layers=layers, rank=rank,
            micro_dp=groups.micro_dp,
        )  # fmt: skip
        lending = HybridEngine(
            train=train, gen=gen, specs=specs, num_layers=layers, rank=rank,
            micro_dp=groups.micro_dp, lend_training=True,
        )  # fmt: skip
        full_engine = HybridEngine(
            train=train, gen=full_layout, specs=specs, num_layers=layers, rank=rank,
            micro_dp=full_groups.micro_dp,
        )  # fmt: skip
        i, j, _ = train.coords(rank)
        shard = synthetic_shard(
            specs, p=p, t=t, stage=i, tp=j, num_layers=layers, seed=1, dtype=torch.bfloat16
        )
        full_engine.training = shard
        before = {k: v.clone() for k, v in shard.items()}
        runs: dict[str, list[dict]] = {"a": [], "l": [], "b": [], "c": []}
        copy = None
        for _ in range(repeats):
            dist.barrier()
            gen_a, ma = _micro_dp(engine, shard)
            runs["a"].append(ma)
            dist.barrier()
            gen_b, mb = _gather_all(full_engine, train, gen, rank)
            runs["b"].append(mb)
            assert all(torch.equal(gen_a[k], gen_b[k]) for k in gen_a) and len(gen_a) == len(gen_b)
            del gen_b
            if copy is None:  # (c)'s rollout copy lives for the whole run
                copy = {k: torch.empty_like(v.contiguous()) for k, v in gen_a.items()}
            dist.barrier()
            runs["c"].append(_rollout_copy(specs, train, gen, shard, rank, copy, layers))
            assert all(torch.equal(gen_a[k], copy[k]) for k in gen_a)
            dist.barrier()
            # (a) lending its training tensors: nothing else may read them meanwhile, so
            # it runs alone, after the others; the shard must come back bit for bit.
            gen_l, ml = _micro_dp(lending, shard)
            runs["l"].append(ml)
            assert all(torch.equal(gen_a[k], gen_l[k]) for k in gen_a)
            del gen_l
            lending.to_training()
            engine.to_training()
            assert all(torch.equal(shard[k], before[k]) for k in shard)
            del gen_a
        results[(p, t, d, pg, tg)] = {
            "runs": runs,
            "train_bytes": _nbytes(shard.values()),
            "gen_bytes": _nbytes(copy.values()),
            "minimum": _nbytes(copy.values()) - _nbytes(shard.values()),
            "uniform": uniform_transition_bytes(shape.num_params(), train, gen, 2),
        }
        del shard, copy
    return results


def main() -> None:
    """Run the benchmark and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    # Checked here: a bad count would otherwise fail in every spawned rank.
    stages = max(max(p, pg) for (p, _, _), (pg, _) in LAYOUTS)
    if args.layers < 1 or args.layers % stages:
        parser.error(
            f"--layers {args.layers}: the layers are split over pipeline size {stages}, so "
            f"give a positive multiple of {stages} (for example --layers 2)"
        )
    from hfsdk_backend_common.testing.launch import run_gloo

    shape = _shape(args.layers)
    n = shape.num_params()
    print(
        f"Llama-shaped model: {n / 1e6:.0f}M parameters (bf16, {n * 2 / MB:.0f} MiB), "
        f"{args.layers} layers; 8 gloo processes; best of {args.repeats}\n"
    )
    per_rank = run_gloo(
        8,
        "reshard:bench_rank",
        {"layers": args.layers, "repeats": args.repeats},
        path=[str(Path(__file__).parent)],
        timeout=3000,
    )
    names = {
        "a": "(a) micro-DP",
        "l": "(a) micro-DP, lent",
        "b": "(b) gather-all",
        "c": "(c) rollout copy",
    }
    print(
        "| (p,t,d) -> (pg,tg,dg,d) | scheme | MiB recv/rank | vs minimum | s | "
        "peak extra MiB/rank | bytes vs (b) | time vs (b) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    held: dict[str, tuple[int, int, int]] = {}
    for key in per_rank[0]:
        p, t, d, pg, tg = key
        dg = p * t // (pg * tg)
        label = f"({p},{t},{d}) -> ({pg},{tg},{dg},{d})"
        minimum = max(r[key]["minimum"] for r in per_rank)
        summary = {}
        for scheme in "albc":
            best = [min(r[key]["runs"][scheme], key=lambda m: m["seconds"]) for r in per_rank]
            summary[scheme] = {
                "bytes": max(m["bytes"] for m in best),
                "seconds": max(m["seconds"] for m in best),
                "peak": max(m["peak"] for m in best),
                "held": max(m.get("held", 0) for m in best),
            }
        held[label] = (summary["a"]["held"], summary["l"]["held"], minimum)
        for scheme in "albc":
            s = summary[scheme]
            print(
                f"| {label} | {names[scheme]} | {s['bytes'] / MB:.1f} | "
                f"{s['bytes'] / minimum:.3f}x | {s['seconds']:.2f} | {s['peak'] / MB:.1f} | "
                f"{s['bytes'] / summary['b']['bytes']:.2f} | "
                f"{s['seconds'] / summary['b']['seconds']:.2f} |"
            )
    print("\nHeld beyond the training shard while generating (MiB/rank, max over ranks):")
    print("| layout | (a) | (a) lent | generation - training shard |")
    print("|---|---|---|---|")
    for label, (plain, lent, minimum) in held.items():
        print(f"| {label} | {plain / MB:.1f} | {lent / MB:.1f} | {minimum / MB:.1f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
