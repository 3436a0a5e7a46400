"""The Worker/WorkerGroup example at the top of ``docs/runtime.md`` runs as written.

The doc says it runs on a CPU-only machine, so the block must be
self-contained: it is run, unchanged, in a fresh interpreter (its own local
Ray, as a user pasting it gets) and must print the concatenated output's shape.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ...conftest import run_python

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

DOC = Path(__file__).resolve().parents[3] / "docs" / "runtime.md"


def doc_example_source() -> str:
    """The first python block of ``docs/runtime.md``: the one that builds a WorkerGroup."""
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.M | re.S)
    found = [b for b in blocks if "WorkerGroup(ActorWorker" in b]
    assert len(found) == 1, f"{DOC} has {len(found)} python blocks with the WorkerGroup example"
    return found[0]


@pytest.mark.heavy
def test_runtime_example_runs_as_written() -> None:
    source = doc_example_source()
    result = run_python(source + '\nprint("LOG_PROB_SHAPE", tuple(out["log_prob"].shape))\n')
    assert result.returncode == 0, result.stderr[-3000:]
    shape = re.search(r"LOG_PROB_SHAPE \((\d+),\)", result.stdout)
    assert shape is not None, result.stdout[-2000:]
    assert int(shape.group(1)) > 0
