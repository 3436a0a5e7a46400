"""The fault-injection hook: silent unless asked, then exactly where asked."""

from __future__ import annotations

import errno
import subprocess
import sys

import pytest

from hfsdk.core.trainer.faults import FAULT_ENV, fault_requested, maybe_fault


def test_only_the_named_point_and_step_fire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    assert not fault_requested("save_mid", 2)
    monkeypatch.setenv(FAULT_ENV, "save_mid:2, step_end:5")
    assert fault_requested("save_mid", 2) and fault_requested("step_end", 5)
    assert not fault_requested("save_mid", 3) and not fault_requested("metrics_mid", 2)


def test_enospc_points_raise_a_full_disk_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "save_enospc:1")
    with pytest.raises(OSError) as info:
        maybe_fault("save_enospc", 1)
    assert info.value.errno == errno.ENOSPC


def test_kill_points_end_the_process_with_sigkill() -> None:
    code = "from hfsdk.core.trainer.faults import maybe_fault; maybe_fault('step_end', 3)"
    done = subprocess.run(
        [sys.executable, "-c", code], env={FAULT_ENV: "step_end:3"}, capture_output=True
    )
    assert done.returncode == -9
