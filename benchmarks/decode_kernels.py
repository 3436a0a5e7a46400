"""The decoder's matrix products on weights as stored against weights reordered for oneDNN.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/decode_kernels.py [--repeats 4] [--rows 32]

Two tables on the compute-bound benchmark model (``compute_bound_task.py``, a
29.5M Llama, built locally): GFLOP/s of ``x @ W.T`` against
``hfsdk_backend_common.hybrid.packed_linear.DecodeLinears`` for each of its
weight shapes at ``--rows`` rows (one decode step of that many sequences),
float32 and bfloat16; then ``TPDecoder.generate`` of ``--rows`` × 64 sampled
tokens with and without the reordered weights (seconds, the reordering
included, median of ``--repeats``, alternating).

The thread count is a condition of the GFLOP/s, so it is left to the caller
(torch's default is every core) and printed first; the table in
docs/benchmarks.md was taken at two threads, to compare with the machine's
two-thread calibrated peak. Set ``OMP_NUM_THREADS`` to reproduce it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch


def _seconds(fn: Callable[[], object], calls: int) -> float:
    for _ in range(5):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main() -> None:
    """Print both tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--rows", type=int, default=32)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from compute_bound_task import ensure_compute_bound_assets
    from transformers import LlamaForCausalLM

    from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
    from hfsdk_backend_common.hybrid.llama_format import hf_llama_shape, hf_llama_to_megatron
    from hfsdk_backend_common.hybrid.packed_linear import DecodeLinears

    with tempfile.TemporaryDirectory() as tmp:
        model_dir, _ = ensure_compute_bound_assets(Path(tmp) / "compute_task")
        hf = LlamaForCausalLM.from_pretrained(model_dir).eval()
    named = {n: p.detach() for n, p in hf.named_parameters()}
    shard = hf_llama_to_megatron(named, hf_llama_shape(hf.config))
    shape = DecoderShape.from_hf_config(hf.config)
    capability = torch.backends.cpu.get_cpu_capability()
    print(f"{torch.get_num_threads()} threads, CPU capability {capability}")
    print("\n| dtype | weight (out × in) | x @ W.T GFLOP/s | reordered GFLOP/s |")
    print("|---|---|---:|---:|")
    shapes = {tuple(t.shape): n for n, t in shard.items() if t.dim() == 2 and "embedding" not in n}
    with torch.no_grad():
        for dtype in (torch.float32, torch.bfloat16):
            for (out, inner), name in sorted(shapes.items()):
                w = shard[name].to(dtype)
                x = torch.randn(args.rows, inner).to(dtype)
                linears = DecodeLinears({name: w}, [name])
                flops = 2 * args.rows * inner * out
                plain = flops / _seconds(lambda: x @ w.T, 200) / 1e9  # noqa: B023
                packed = flops / _seconds(lambda: linears(x, name), 200) / 1e9  # noqa: B023
                print(f"| {str(dtype)[6:]} | {out} × {inner} | {plain:.0f} | {packed:.0f} |")
    ids = torch.randint(3, shape.vocab_size, (args.rows, 5))
    print(f"\n| dtype | generate {args.rows} × 64, x @ W.T s | reordered s |")
    print("|---|---:|---:|")
    for dtype in (torch.float32, torch.bfloat16):
        weights = {n: t.to(dtype) for n, t in shard.items()}
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for packed in (False, True):
                start = time.perf_counter()
                decoder = TPDecoder(weights, shape, tg=1, tp_rank=0)
                if not packed:
                    decoder.linear.packed.clear()
                decoder.generate(
                    ids, torch.ones_like(ids), max_new_tokens=64, eos_ids=[], pad_id=0,
                    greedy=False, sampling={}, generator=torch.Generator().manual_seed(0),
                )  # fmt: skip
                times[packed].append(time.perf_counter() - start)
        plain, packed = (statistics.median(times[k]) for k in (False, True))
        print(f"| {str(dtype)[6:]} | {plain:.2f} | {packed:.2f} |")


if __name__ == "__main__":
    main()
