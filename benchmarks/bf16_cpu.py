"""How much slower bf16 compute is than float32 on a CPU, with and without native kernels.

A training step's core (forward and backward of a stack of linear layers with
GELU, the shape of a small decoder's MLP) timed in float32 and bfloat16, once
with every kernel the CPU has and once restricted to AVX2
(``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2``: what an AVX2-only machine
such as an AMD EPYC without AVX-512 runs). Each setting runs in its own
process (the variables act at start-up) and prints the median of the repeats.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bf16_cpu.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def measure(dtype_name: str, width: int, layers: int, rows: int, repeats: int) -> float:
    """Median seconds of one forward+backward pass in ``dtype_name``."""
    import torch

    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)
    model = torch.nn.Sequential(
        *[
            torch.nn.Sequential(
                torch.nn.Linear(width, 4 * width),
                torch.nn.GELU(),
                torch.nn.Linear(4 * width, width),
            )
            for _ in range(layers)
        ]
    ).to(dtype)
    x = torch.randn(rows, width, dtype=dtype)
    times = []
    for _ in range(repeats + 1):  # the first pass warms the kernels up
        started = time.perf_counter()
        model(x).float().square().mean().backward()
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def main() -> None:
    """Print the table (or, with --child, one measurement as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        seconds = measure(args.child, args.width, args.layers, args.rows, args.repeats)
        print(json.dumps({"s": seconds}))
        return
    from hfsdk_backend_common.precision_check import NATIVE_HALF_FLAGS, cpu_flags

    flags = cpu_flags() or set()
    native = sorted(flags.intersection(NATIVE_HALF_FLAGS["bfloat16"])) or ["none"]
    print(f"CPU bf16 flags: {', '.join(native)}; threads: {os.environ.get('OMP_NUM_THREADS')}")
    print(f"{'kernels':<22}{'float32 s':>11}{'bfloat16 s':>12}{'bf16 / fp32':>13}")
    for label, extra in (("all the CPU has", {}), ("AVX2 only", AVX2_ONLY)):
        seconds = {}
        for dtype in ("float32", "bfloat16"):
            cmd = [sys.executable, __file__, "--child", dtype, "--width", str(args.width),
                   "--layers", str(args.layers), "--rows", str(args.rows),
                   "--repeats", str(args.repeats)]  # fmt: skip
            out = subprocess.run(
                cmd, env={**os.environ, **extra}, capture_output=True, text=True, check=True
            )
            seconds[dtype] = json.loads(out.stdout.strip().splitlines()[-1])["s"]
        ratio = seconds["bfloat16"] / seconds["float32"]
        print(f"{label:<22}{seconds['float32']:>11.3f}{seconds['bfloat16']:>12.3f}{ratio:>12.1f}x")


if __name__ == "__main__":
    main()
