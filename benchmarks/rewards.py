"""Sandboxed code-reward throughput, and its overhead over running the same programs bare.

    .venv/bin/python benchmarks/rewards.py [--programs 64] [--cases 5] [--looping 8]

``--programs`` responses with ``--cases`` stdin/stdout cases each; ``--looping``
of them loop forever (they cost the wall-clock limit per case). Prints one
table: samples/s of ``code_tests`` (sandboxed, concurrency = cores), and of the
same correct programs run with a plain ``python -c`` subprocess (no limits,
no guard), so the difference is what the sandbox adds. Then the ``remote``
reward's latency per batch against an HTTP server on the loopback address.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from hfsdk_rewards.code_tests import CodeTestsConfig, code_tests
from hfsdk_sandbox import SandboxLimits
from hfsdk_sandbox.runner import default_concurrency

CORRECT = "a, b = map(int, input().split())\nprint(a + b)"
LOOPING = "while True:\n    pass"


def _dataset(programs: int, cases: int, looping: int) -> tuple[list[str], list[str]]:
    inputs = [f"{i} {i + 1}\n" for i in range(cases)]
    outputs = [f"{2 * i + 1}\n" for i in range(cases)]
    truth = json.dumps({"inputs": inputs, "outputs": outputs})
    responses = [f"```python\n{LOOPING if i < looping else CORRECT}\n```" for i in range(programs)]
    return responses, [truth] * programs


def _bare(programs: int, cases: int) -> float:
    started = time.perf_counter()
    for _ in range(programs):
        for i in range(cases):
            subprocess.run(
                [sys.executable, "-c", CORRECT],
                input=f"{i} {i + 1}\n",
                capture_output=True,
                text=True,
                check=True,
            )
    return time.perf_counter() - started


def _remote_latency(batches: int, batch_size: int) -> tuple[float, float]:
    """Median and max seconds per batch of ``remote`` against a local length scorer."""
    import statistics
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from hfsdk_rewards.remote import RemoteRewardConfig, remote_reward

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body = json.dumps({"scores": [len(r) for r in payload["responses"]]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = RemoteRewardConfig(url=f"http://127.0.0.1:{server.server_address[1]}/score")
    times = []
    responses = ["x" * 200] * batch_size
    for _ in range(batches):
        started = time.perf_counter()
        remote_reward(["p"] * batch_size, responses, config=config)
        times.append(time.perf_counter() - started)
    server.shutdown()
    server.server_close()
    return statistics.median(times), max(times)


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
    print(
        f"{args.programs} programs x {args.cases} cases, {default_concurrency()} cores, "
        f"wall limit {args.wall_s}s"
    )
    print(f"{'setting':<40} {'seconds':>8} {'samples/s':>10} {'passed':>7}")
    for name, seconds, passed in rows:
        print(f"{name:<40} {seconds:8.2f} {args.programs / seconds:10.1f} {passed:7.0f}")
    print(f"sandbox overhead on correct programs: {rows[0][1] / bare:.2f}x bare")
    median, worst = _remote_latency(batches=20, batch_size=256)
    print(
        f"remote reward, 256 samples per batch (4 requests of 64): median {median * 1e3:.1f} ms, "
        f"max {worst * 1e3:.1f} ms per batch"
    )


if __name__ == "__main__":
    main()
