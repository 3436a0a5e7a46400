"""A deadline interrupts its block; one too long to wait for never fires and stops no other."""

from __future__ import annotations

import math
import time

import pytest

from hfsdk.core.deadlines import DeadlineExceeded, deadline


@pytest.mark.parametrize("seconds", [1e10, math.inf, math.nan])
def test_a_deadline_too_long_to_wait_for_never_fires_and_later_ones_still_do(
    seconds: float,
) -> None:
    # The process has one watchdog thread: a wait it cannot make must not end it.
    with deadline(seconds, "never", log_stack=False):
        time.sleep(0.1)  # the watchdog now waits on this deadline
    with pytest.raises(DeadlineExceeded, match=r"^short$"), deadline(0.2, "short", log_stack=False):
        time.sleep(5)
