"""Checks every test of the repository shares (tests/, plugins/, examples/)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _torch_threads_unchanged() -> Iterator[None]:
    """A test that leaves torch's thread count changed fails here, and the count is put back.

    The suite runs in one process; a count changed by one test reaches every later
    one, and an in-process vLLM engine built afterwards aborts in its CPU attention
    (``thread_num == thread_num (2 vs. 1)``), then hangs the session.
    """
    import torch

    threads = torch.get_num_threads()
    yield
    left = torch.get_num_threads()
    if left != threads:
        torch.set_num_threads(threads)
        pytest.fail(
            f"this test left torch's thread count at {left} (it was {threads}); restore it "
            "in a finally block or a fixture",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _no_process_group_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that leaves a ``torch.distributed`` process group behind fails here; it is destroyed.

    The suite runs in one process; a group left initialised makes every later
    in-process run (``trainer.executor=local``) refuse to start, far from the test
    that leaked it. A group made by a wider-scoped fixture exists before and is not blamed.
    """
    dist = sys.modules.get("torch.distributed")
    before = dist is not None and dist.is_available() and dist.is_initialized()
    yield
    dist = sys.modules.get("torch.distributed")
    if before or dist is None or not (dist.is_available() and dist.is_initialized()):
        return
    dist.destroy_process_group()
    pytest.fail(
        f"{request.node.nodeid} left torch.distributed initialised; destroy the process group "
        "it created (dist.destroy_process_group()) in a finally block or a fixture",
        pytrace=False,
    )
