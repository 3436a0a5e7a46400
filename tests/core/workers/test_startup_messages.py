"""Ray's start-up, about 20 s on a busy machine, says what is starting before it starts."""

from __future__ import annotations

import logging

import pytest


class _Stop(Exception):
    """Raised by the fake ``ray.init``: the test needs only what was said before it."""


def test_starting_a_local_ray_instance_is_announced(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import ray

    from hfsdk.core.workers import ray_runtime

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)

    def fake_init(**kwargs: object) -> None:
        raise _Stop

    monkeypatch.setattr(ray, "init", fake_init)
    with caplog.at_level(logging.INFO, logger="hfsdk"), pytest.raises(_Stop):
        ray_runtime.connect(num_cpus=2, virtual_devices=3)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("hfsdk")]
    assert any(
        line.startswith("Ray: starting a local instance (2 CPUs, 3 virtual device slot(s)")
        for line in lines
    ), lines
