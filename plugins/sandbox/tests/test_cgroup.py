"""The per-run pids cgroup: made where possible, ``None`` elsewhere, removed after."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk_sandbox.cgroup import make_pids_cgroup


def test_no_cgroup_hierarchy_means_none(tmp_path: Path) -> None:
    assert make_pids_cgroup(8, root=tmp_path) is None


def test_a_made_cgroup_caps_tasks_and_is_removed() -> None:
    group = make_pids_cgroup(8)
    if group is None:
        pytest.skip("this process may not make a pids cgroup here")
    try:
        assert (group.path / "pids.max").read_text().strip() == "8"
        assert group.procs.read_text().strip() == ""
    finally:
        group.remove()
    assert not group.path.exists()
