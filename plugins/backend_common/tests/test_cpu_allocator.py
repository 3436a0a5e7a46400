"""``keep_freed_cpu_memory``: a freed large tensor's pages are reused, not faulted in again.

Each case runs in a fresh interpreter, since the setting is process-wide and
applied once. A 64 MiB tensor is touched and freed, then a 48 MiB one is
touched, and the page faults of the two are compared: glibc's default gives
the first's pages back and faults the second's in anew; the tuned heap serves
the second from the first's memory. (The second is smaller because a block
the same size may not fit the freed one: torch asks for aligned memory, which
needs a little slack when a small allocation has landed after the freed block.)
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

PROBE = """
import json, resource, torch
from hfsdk_backend_common.cpu_allocator import keep_freed_cpu_memory

applied = keep_freed_cpu_memory()

def touch_faults(mib):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = torch.empty(mib * 2**18, dtype=torch.float32)
    t.fill_(1.0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del t
    return faults

first = touch_faults(64)
second = touch_faults(48)
print(json.dumps({"applied": applied, "first": first, "second": second}))
"""

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the setting tunes glibc's malloc",
)


def _probe(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    clean.pop("LD_PRELOAD", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
        check=True, timeout=120,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc_only
def test_freed_pages_are_reused() -> None:
    seen = _probe()
    assert seen["applied"] is True
    assert seen["first"] > 0
    assert seen["second"] < seen["first"] / 4, seen


@glibc_only
def test_a_malloc_setting_in_the_environment_wins() -> None:
    seen = _probe(MALLOC_TRIM_THRESHOLD_="131072")
    assert seen["applied"] is False
    assert seen["second"] >= seen["first"] / 2, seen
