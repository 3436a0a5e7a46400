"""Cluster profiles are written the core's atomic way (temp file, fsync, rename)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hfsdk.core import atomic
from hfsdk_planner.cluster import Cluster, local


def test_a_saved_profile_is_fsynced_and_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    target = tmp_path / "cluster.yaml"
    local().save(target)
    assert str(tmp_path) in seen  # the directory entry is durable too
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.yaml"]  # no temp file left
    assert Cluster.load(target) == local()
