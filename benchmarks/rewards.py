"""Sandboxed code-reward throughput, and its overhead over running the same programs bare.

    .venv/bin/python benchmarks/rewards.py [--programs 64] [--cases 5] [--looping 8]

``--programs`` responses with ``--cases`` stdin/stdout cases each; ``--looping``
of them loop forever (they cost the wall-clock limit per case). Prints one
table: samples/s of ``code_tests`` (sandboxed, concurrency = cores), and of the
same correct programs run with a plain ``python -c`` subprocess (no limits,
no guard), so the difference is what the sandbox adds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from hfsdk.core.rewards.code_tests import CodeTestsConfig, code_tests
from hfsdk.core.sandbox import SandboxLimits
from hfsdk.core.sandbox.runner import default_concurrency

CORRECT = "a, b = map(int, input().split())\nprint(a + b)"
LOOPING = "while True:\n    pass"


def _dataset(programs: int, cases: int, looping: int) -> tuple[list[str], list[str]]:
    inputs = [f"{i} {i + 1}\n" for i in range(cases)]
    outputs = [f"{2 * i + 1}\n" for i in range(cases)]
    truth = json.dumps({"inputs": inputs, "outputs": outputs})
    responses = [
        f"```python\n{LOOPING if i < looping else CORRECT}\n```" for i in range(programs)
    ]
    return responses, [truth] * programs


def _bare(programs: int, cases: int) -> float:
    started = time.perf_counter()
    for _ in range(programs):
        for i in range(cases):
            subprocess.run(
                [sys.executable, "-c", CORRECT], input=f"{i} {i + 1}\n", capture_output=True,
                text=True, check=True,
            )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=64)
    parser.add_argument("--cases", type=int, default=5)
    parser.add_argument("--looping", type=int, default=8)
    parser.add_argument("--wall-s", type=float, default=2.0)
    args = parser.parse_args()
    config = CodeTestsConfig(limits=SandboxLimits(wall_s=args.wall_s, cpu_s=2))
    rows = []
    for looping in (0, args.looping):
        responses, truths = _dataset(args.programs, args.cases, looping)
        started = time.perf_counter()
        scores = code_tests(["p"] * args.programs, responses, config=config, ground_truth=truths)
        seconds = time.perf_counter() - started
        passed = sum(s["score"] for s in scores)
        rows.append((f"sandboxed, {looping} looping", seconds, passed))
    correct = args.programs
    bare = _bare(correct, args.cases) / max(1, default_concurrency())
    rows.append(("bare subprocess (per core), 0 looping", bare, float(correct)))
    print(f"{args.programs} programs x {args.cases} cases, {default_concurrency()} cores, "
          f"wall limit {args.wall_s}s")
    print(f"{'setting':<40} {'seconds':>8} {'samples/s':>10} {'passed':>7}")
    for name, seconds, passed in rows:
        print(f"{name:<40} {seconds:8.2f} {args.programs / seconds:10.1f} {passed:7.0f}")
    print(f"sandbox overhead on correct programs: {rows[0][1] / bare:.2f}x bare")


if __name__ == "__main__":
    main()
