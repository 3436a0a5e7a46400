"""What one sandboxed program costs to start, per isolation layer.

    .venv/bin/python benchmarks/sandbox_startup.py [--runs 30]

Runs ``print(1)`` ``--runs`` times, one after another, four ways: a bare
``python -I -S`` subprocess; ``run_python`` with ``process`` isolation (the
weaker layers); ``run_python`` with ``os`` isolation (bubblewrap, seccomp,
pids cgroup, pipes); and the same without the pids cgroup (what a machine
without a writable cgroup pays). Prints the median and 90th percentile in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable

from hfsdk_sandbox import SandboxLimits, run_python
from hfsdk_sandbox import runner as sandbox_runner
from hfsdk_sandbox.bwrap import interpreter, unavailable_reason
from hfsdk_sandbox.runner import ISOLATION_ENV

LIMITS = SandboxLimits(wall_s=10.0)


def _timed(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm: probes, page cache
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _sandboxed(mode: str) -> Callable[[], object]:
    def run() -> object:
        os.environ[ISOLATION_ENV] = mode
        result = run_python("print(1)", limits=LIMITS)
        assert result.ok, result.reason
        return result

    return run


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    bare = [interpreter(), "-I", "-S", "-c", "print(1)"]

    def run_bare() -> object:
        # Captured as run_python captures the sandboxed output: nothing printed, the same pipes.
        return subprocess.run(bare, check=True, capture_output=True)

    rows = [("bare python -I -S", _timed(run_bare, runs))]
    rows.append(("process isolation", _timed(_sandboxed("process"), runs)))
    if unavailable_reason() is None:
        rows.append(("os isolation (bwrap+seccomp+cgroup)", _timed(_sandboxed("os"), runs)))
        real = sandbox_runner.make_pids_cgroup
        sandbox_runner.make_pids_cgroup = lambda _n: None  # type: ignore[assignment]
        try:
            rows.append(("os isolation without cgroup", _timed(_sandboxed("os"), runs)))
        finally:
            sandbox_runner.make_pids_cgroup = real
    else:
        print(f"bubblewrap cannot start here: {unavailable_reason()}")
    print(f"{'way':40s} {'median ms':>10s} {'p90 ms':>8s}")
    for name, times in rows:
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"{name:40s} {statistics.median(times):10.1f} {p90:8.1f}")


if __name__ == "__main__":
    main()
