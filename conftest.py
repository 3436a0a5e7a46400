"""Checks every test of the repository shares (tests/, plugins/, examples/)."""

from __future__ import annotations

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
