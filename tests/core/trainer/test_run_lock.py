"""One run directory, one writer; a dead writer's lock is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.run_lock import RunDirLock


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    first = RunDirLock(tmp_path)
    first.acquire()
    with pytest.raises(HfsdkError, match=rf"in use by another hfsdk run \(pid {os.getpid()}\)"):
        RunDirLock(tmp_path).acquire()
    first.release()
    second = RunDirLock(tmp_path)
    second.acquire()  # released: free again
    assert second.held
    second.release()


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from hfsdk.core.trainer.run_lock import RunDirLock
        RunDirLock(Path({str(tmp_path)!r})).acquire()
        print("locked", flush=True)
        time.sleep(60)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(HfsdkError, match=rf"pid {holder.pid}\)"):
            RunDirLock(tmp_path).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        lock = RunDirLock(tmp_path)
        lock.acquire()  # the stale file still names the dead pid; the lock is free
        assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
        lock.release()
    finally:
        holder.kill()
        holder.wait()
