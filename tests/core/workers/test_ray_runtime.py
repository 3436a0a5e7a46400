"""Connecting to Ray without starting it: address choice, virtual devices, health checks."""

from __future__ import annotations

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.ray_runtime import (
    default_virtual_devices,
    health_check_config,
    resolve_address,
)


def test_address_argument_wins_over_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert resolve_address("10.0.0.2:6379") == "10.0.0.2:6379"
    assert resolve_address(None) == "10.0.0.1:6379"
    monkeypatch.delenv("RAY_ADDRESS")
    assert resolve_address(None) is None


def test_virtual_devices_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HFSDK_VIRTUAL_DEVICES", "6")
    assert default_virtual_devices() == 6
    monkeypatch.setenv("HFSDK_VIRTUAL_DEVICES", "none")
    with pytest.raises(HfsdkError, match="expected a positive integer"):
        default_virtual_devices()
    monkeypatch.delenv("HFSDK_VIRTUAL_DEVICES")
    assert default_virtual_devices() >= 4


def test_death_timeout_sets_ray_health_checks() -> None:
    config = health_check_config(5.0)
    period = config["health_check_period_ms"]
    assert period * config["health_check_failure_threshold"] == 5000
    assert health_check_config(1.0)["health_check_period_ms"] == 500
    with pytest.raises(HfsdkError, match="death_timeout_s=0"):
        health_check_config(0)


def test_an_unreachable_address_fails_fast_in_one_line() -> None:
    import time

    from hfsdk.core.errors import HfsdkError
    from hfsdk.core.workers.ray_runtime import check_reachable

    started = time.monotonic()
    with pytest.raises(HfsdkError, match=r"'127\.0\.0\.1:1' is unreachable") as info:
        check_reachable("127.0.0.1:1", timeout_s=2.0)
    assert time.monotonic() - started < 5.0 and "\n" not in str(info.value)
    for bad in ("nonsense", "host:port", "10.0.0.1:99999"):
        with pytest.raises(HfsdkError, match="not HOST:PORT"):
            check_reachable(bad)
    # "local" is left to Ray (a new instance); "auto": test_ray_startup_errors.py.
    assert check_reachable("local") == "local"
