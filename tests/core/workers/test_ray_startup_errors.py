"""Ray start-up failures end in one line (exit 2), not an internal error.

``trainer.ray_address=auto`` with no cluster, ``auto`` finding another run's private
local instance, and a full Ray temp directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hfsdk.core.cli.main import main
from hfsdk.core.errors import HfsdkError

RUN = ("--algo", "grpo", "--quiet", "trainer.total_steps=1", "trainer.executor=ray")


@pytest.fixture
def ray_tmpdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private, short ``RAY_TMPDIR`` (Ray's socket paths must stay under 108 bytes)."""
    from hfsdk.core.workers.ray_runtime import shutdown

    shutdown()
    path = Path(tempfile.mkdtemp(prefix="hfrt", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield path
    shutdown()
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def no_ray_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make reaching ``ray.init`` fail the test: each error must come before Ray starts."""
    import ray

    def refuse(*_a: object, **_k: object) -> None:
        raise SystemError("ray.init was called: the start-up problem was not caught before Ray")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)


def _run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``hfsdk run ARGS``: its exit status and the last line it wrote to stderr."""
    with pytest.raises(SystemExit) as info:
        main(["run", *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return int(info.value.code or 0), [line for line in err.splitlines() if line.strip()][-1]


def test_auto_without_a_cluster_is_one_line(
    ray_tmpdir: Path, no_ray_init: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hfsdk.core.workers.ray_runtime import check_reachable

    with pytest.raises(HfsdkError, match=r"no Ray cluster recorded for trainer\.ray_address=auto"):
        check_reachable("auto")
    args = [*RUN, "trainer.ray_address=auto", "--run-dir", str(tmp_path / "run")]
    code, line = _run_cli(args, capsys)
    assert code == 2 and line.startswith("Error: no Ray cluster recorded"), line
    assert "ray start --head" in line and "drop trainer.ray_address" in line


def test_auto_refuses_another_runs_private_instance(ray_tmpdir: Path) -> None:
    """Two processes: one run's local instance, and a second driver asking for ``auto``."""
    from hfsdk.core.workers.ray_runtime import connect

    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        address = owner.stdout.readline().strip()
        assert address, "the owner process did not start its Ray instance"
        # Ray's own `auto` would join it (it finds any Ray process on the machine).
        with pytest.raises(HfsdkError, match="no Ray cluster recorded"):
            connect("auto")
        # Even when recorded as the machine's cluster, it is refused: it is private. The
        # joiner is a process of its own: Ray reads RAY_AUTH_MODE (sends the token) at import.
        (ray_tmpdir / "ray" / "ray_current_cluster").write_text(address)
        env = {**os.environ, "RAY_AUTH_MODE": "token"}
        joiner = subprocess.run(
            [sys.executable, "-c", _JOINER], env=env, capture_output=True, text=True, timeout=180
        )
        assert joiner.stdout.startswith("HfsdkError: trainer.ray_address=auto found"), (
            joiner.stdout + joiner.stderr[-2000:]
        )
        assert "another hfsdk run's private Ray" in joiner.stdout, joiner.stdout
        assert "ray start --head" in joiner.stdout and joiner.stdout.count("\n") == 1
    finally:
        owner.communicate(input="", timeout=120)  # stdin closed: the owner stops its Ray


_OWNER = """
import sys
from hfsdk.core.workers.ray_runtime import connect, shutdown
print(connect(num_cpus=1, virtual_devices=1).address, flush=True)
sys.stdin.read()
shutdown()
"""

_JOINER = """
import ray
from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.ray_runtime import connect
try:
    print("joined", connect("auto"))
except HfsdkError as exc:
    assert not ray.is_initialized(), "left connected to the private instance"
    print(f"HfsdkError: {exc}")
"""


def test_a_full_ray_temp_dir_is_one_line(
    ray_tmpdir: Path,
    no_ray_init: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    real = shutil.disk_usage

    def disk_usage(path: Any) -> Any:
        """The Ray temp dir's filesystem with 40 MiB free; every other one as it is."""
        if str(path).startswith(str(ray_tmpdir)):
            return SimpleNamespace(total=100 << 30, used=(100 << 30) - (40 << 20), free=40 << 20)
        return real(path)

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    from hfsdk.core.workers.ray_runtime import connect

    with pytest.raises(HfsdkError, match=r"Ray's temp directory .*hfrt.*/ray is full") as info:
        connect(num_cpus=1, virtual_devices=1)
    assert "RAY_TMPDIR" in str(info.value) and "40 MiB free" in str(info.value)
    code, line = _run_cli([*RUN, "--run-dir", str(tmp_path / "run")], capsys)
    assert code == 2 and line.startswith("Error: Ray's temp directory"), line
