"""Decoding at generation pipeline size pg = 1 vs pg = 2 on 4 gloo processes.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pp_decode.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pp_decode.py --layers 4 --new-tokens 16

A Llama-shaped model (synthetic weights, megatron layout) is sharded in the
training layout (p=2, t=2, d=1); each rank reshards into each generation
layout (pg, tg, dg) with the 3D-HybridEngine and greedy-decodes the same
prompts there with ``TPDecoder`` (the dg generation replicas split the
prompts). Per layout: generation shard per rank (what a rank holds while
decoding), bytes received in the transition, transition and decoding seconds
(max over ranks) and generated tokens per second over all ranks. pg = 2 halves
the generation shard but runs the stages one after the other for every token
(the plain schedule, no micro-batches), so it is not expected to be faster.
gloo over loopback TCP on a shared 2-core machine: seconds are indicative.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_common.hybrid.groups import create_groups
from hfsdk_backend_common.hybrid.layout import (
    HeadShape,
    TrainLayout,
    generation_layout,
    generation_pp_groups,
    generation_tp_groups,
    validate,
)
from hfsdk_backend_common.hybrid.llama_format import LlamaShape, llama_specs
from hfsdk_backend_common.hybrid.reshard import HybridEngine
from hfsdk_backend_common.hybrid.stages import StageLink
from hfsdk_backend_common.testing.synthetic import synthetic_shard

TRAIN = (2, 2)
GENERATION = [(1, 2), (2, 2), (1, 1), (2, 1)]  # (pg, tg)
MB = 2**20


def _shape(layers: int) -> LlamaShape:
    return LlamaShape(
        vocab_size=8000,
        hidden_size=512,
        intermediate_size=1408,
        num_layers=layers,
        num_heads=8,
        num_kv_heads=4,
    )


def _one_layout(rank: int, world: int, shape: LlamaShape, pg: int, tg: int, args) -> dict:
    import torch.distributed as dist

    specs = llama_specs(shape)
    train = TrainLayout(*TRAIN, world // (TRAIN[0] * TRAIN[1]))
    gen = generation_layout(train, tp=tg, pp=pg)
    validate(train, gen, HeadShape(num_layers=shape.num_layers, num_heads=8, num_kv_heads=4))
    groups = create_groups(train, gen)
    engine = HybridEngine(
        train=train, gen=gen, specs=specs, num_layers=shape.num_layers, rank=rank,
        micro_dp=groups.micro_dp,
    )  # fmt: skip
    i, j, _ = train.coords(rank)
    shard = synthetic_shard(
        specs, p=train.p, t=train.t, stage=i, tp=j, num_layers=shape.num_layers, seed=3
    )
    tp_ranks = next(g for g in generation_tp_groups(train, gen) if rank in g)
    pp_ranks = next(g for g in generation_pp_groups(train, gen) if rank in g)
    dist.barrier()
    gen_shard = engine.to_generation(shard)
    decoder = TPDecoder(
        gen_shard,
        DecoderShape(
            num_layers=shape.num_layers, hidden_size=shape.hidden_size, num_heads=8,
            num_kv_heads=4, head_dim=shape.head_dim, vocab_size=shape.vocab_size,
        ),
        tg=tg, tp_rank=engine.place.gen_tp, tp_group=groups.gen_tp, tp_ranks=tp_ranks,
        stages=StageLink(ranks=pp_ranks, rank=rank, group=groups.gen_pp),
    )  # fmt: skip
    ids = torch.randint(3, shape.vocab_size, (args.prompts, args.prompt_length),
                        generator=torch.Generator().manual_seed(0))  # fmt: skip
    rows = torch.arange(args.prompts).tensor_split(gen.dg)[engine.place.k]
    started = time.perf_counter()
    out = decoder.generate(
        ids[rows], torch.ones_like(ids[rows]), max_new_tokens=args.new_tokens, eos_ids=[-1],
        pad_id=0,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    stats = engine.stats
    engine.to_training()
    # Tokens each generation replica produced, counted once (by its first rank).
    first = engine.place.gen_tp == 0 and engine.place.gen_stage == 0
    return {
        "gen_mb": stats.generation_bytes / MB,
        "recv_mb": stats.bytes_received / MB,
        "reshard_s": stats.seconds,
        "decode_s": seconds,
        "tokens": out.numel() if first else 0,
    }


def _worker(rank: int, world: int, args) -> dict:
    shape = _shape(args.layers)
    results = {}
    for pg, tg in GENERATION:
        results[(pg, tg)] = _one_layout(rank, world, shape, pg, tg, args)
    return results


def main() -> None:
    """Run every generation layout on 4 gloo processes and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-length", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    args = parser.parse_args()
    # Checked here: a bad count would otherwise fail in every spawned rank.
    stages = max(TRAIN[0], *(pg for pg, _ in GENERATION))
    if args.layers < 1 or args.layers % stages:
        parser.error(
            f"--layers {args.layers}: the layers are split over pipeline size {stages}, so "
            f"give a positive multiple of {stages} (for example --layers 4)"
        )
    sys.path.insert(0, str(Path(__file__).parent))
    from hfsdk_backend_common.testing.launch import run_gloo

    outcomes = run_gloo(4, "pp_decode:_worker", {"args": args}, path=[str(Path(__file__).parent)])
    params = _shape(args.layers).num_params()
    print(
        f"Llama-shaped, {params / 1e6:.1f}M parameters (fp32), {args.layers} layers; training "
        f"(p, t, d) = ({TRAIN[0]}, {TRAIN[1]}, 1); {args.prompts} prompts x "
        f"{args.prompt_length} tokens, {args.new_tokens} new tokens, greedy\n"
    )
    print("| (pg, tg, dg) | gen shard MiB/rank | recv MiB/rank | reshard s | decode s | tokens/s |")
    print("|---|---|---|---|---|---|")
    for pg, tg in GENERATION:
        rows = [o[(pg, tg)] for o in outcomes]
        dg = TRAIN[0] * TRAIN[1] // (pg * tg)
        decode = max(r["decode_s"] for r in rows)
        tokens = sum(r["tokens"] for r in rows)
        print(
            f"| ({pg}, {tg}, {dg}) | {max(r['gen_mb'] for r in rows):.1f} | "
            f"{max(r['recv_mb'] for r in rows):.1f} | {max(r['reshard_s'] for r in rows):.2f} | "
            f"{decode:.2f} | {tokens / decode:.0f} |"
        )


if __name__ == "__main__":
    main()
