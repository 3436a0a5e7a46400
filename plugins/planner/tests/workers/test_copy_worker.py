"""The copy worker ``hfsdk calibrate`` starts, as a module and in-process."""

from __future__ import annotations

from hfsdk_planner import calibrate as calibration
from hfsdk_planner.workers.copy_worker import copy_rate


def test_the_copy_rate_is_bytes_per_second() -> None:
    rate = copy_rate(4 * 2**20, 0.05)
    # Any machine moves more than 10 MB/s and less than 10 TB/s through one core.
    assert 1e7 < rate < 1e13


def test_shared_bandwidth_runs_the_worker_module_per_device() -> None:
    sizes = calibration.CalibrationSizes.quick()
    total = calibration.measure_shared_bandwidth(sizes, 2)
    assert total is not None and 1e7 < total < 1e13  # two processes ran and printed a rate
