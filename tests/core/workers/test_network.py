"""Local means local: what a run listens on, and who may attach to the Ray it starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfsdk import BuiltinProtocol, Worker, register
from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.ray_runtime import check_auth_mode

HFSDK = str(Path(sys.executable).parent / "hfsdk")
IPV6_LOOPBACK = "00000000000000000000000001000000"  # ::1 as /proc/net/tcp6 writes it
IPV4_MAPPED = "0000000000000000FFFF0000"


def listeners(pid: int | str = "self") -> list[tuple[str, int]]:
    """``(address hex, port)`` of every listening TCP socket process ``pid`` holds."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.append((address, int(port, 16)))
    return found


def _is_loopback(address: str) -> bool:
    # /proc writes IPv4 addresses as little-endian hex: 127.x.y.z ends in 7F.
    ipv4 = address[-8:] if address.startswith(IPV4_MAPPED) else address
    return address == IPV6_LOOPBACK or (len(ipv4) == 8 and ipv4.endswith("7F"))


def _non_loopback(found: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return [(a, p) for a, p in found if not _is_loopback(a)]


def test_the_listener_reader_sees_a_socket_on_every_interface() -> None:
    import socket

    with socket.socket() as sock:  # the check itself must be able to fail
        sock.bind(("", 0))
        sock.listen()
        assert _non_loopback(listeners())


@pytest.mark.slow
def test_a_default_run_listens_on_loopback_only(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    process = subprocess.Popen(
        [HFSDK, "run", "--algo", "grpo", "--quiet", "trainer.total_steps=2",
         "--run-dir", str(tmp_path / "run")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        try:
            seen.update(listeners(process.pid))
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.05)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert seen, "the run's rendezvous store was never seen listening"
    assert not _non_loopback(sorted(seen)), sorted(seen)


class PortWorker(Worker):
    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def rendezvous(self) -> tuple[str | None, int, list[tuple[str, int]]]:
        return os.environ.get("MASTER_ADDR"), int(os.environ["MASTER_PORT"]), listeners()


@pytest.fixture
def ray_runtime() -> Iterator[None]:
    from hfsdk.core.workers.ray_runtime import connect, shutdown

    connect(num_cpus=2, virtual_devices=2, object_store_memory=128 * 2**20)
    try:
        yield
    finally:
        shutdown()


@pytest.mark.distributed
def test_a_one_node_ray_group_meets_on_loopback(ray_runtime: None) -> None:
    from hfsdk.core.workers import ResourcePool, WorkerGroup

    pool = ResourcePool(2, name="net")
    group = WorkerGroup(PortWorker, pool, role="net")
    try:
        (addr0, port0, found0), (addr1, _, _) = group.rendezvous()
        assert addr0 == addr1 == "127.0.0.1"
        store = [a for a, p in found0 if p == port0]
        assert store == ["0100007F"], found0  # rank 0's store, on 127.0.0.1 only
    finally:
        group.shutdown()
        pool.release()


def test_a_local_instance_without_token_auth_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with pytest.raises(HfsdkError, match=r"RAY_AUTH_MODE=disabled would start .* without token"):
        check_auth_mode()
    check_auth_mode(allow_no_auth=True)  # said explicitly
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    check_auth_mode()
    monkeypatch.delenv("RAY_AUTH_MODE")
    check_auth_mode()  # Ray's default for a local instance: token


OWNER = """
import sys
from hfsdk.core.workers.ray_runtime import connect, shutdown
info = connect(num_cpus=1, virtual_devices=1)
print(info.address, flush=True)
sys.stdin.readline()
shutdown()
"""
ATTACH = "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); print('ATTACHED')"


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.distributed
def test_a_driver_without_the_token_cannot_attach(tmp_path: Path) -> None:
    owner_home, other_home = tmp_path / "owner", tmp_path / "other"
    owner_home.mkdir()
    other_home.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    base["OMP_NUM_THREADS"] = "1"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        env={**base, "HOME": str(owner_home)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert owner.stdout is not None
        address = owner.stdout.readline().strip()
        assert address, owner.stderr.read() if owner.stderr else ""
        token = owner_home / ".ray" / "auth_token"
        assert token.is_file()  # Ray made the instance's token ...
        assert token.stat().st_mode & 0o777 == 0o600  # ... and hfsdk keeps it the owner's

        def attach(home: Path, **env: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-c", ATTACH, address],
                env={**base, "HOME": str(home), **env},
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip

        stranger = attach(other_home, RAY_AUTH_MODE="token")  # no token anywhere
        assert stranger.returncode != 0 and "ATTACHED" not in stranger.stdout
        assert "token" in stranger.stderr.lower()
        guesser = attach(other_home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 32)
        assert guesser.returncode != 0 and "InvalidAuthToken" in guesser.stderr
        holder = attach(owner_home, RAY_AUTH_MODE="token")  # the token's owner gets in
        assert holder.returncode == 0 and "ATTACHED" in holder.stdout, holder.stderr
    finally:
        if owner.stdin is not None:
            owner.stdin.write("\n")
            owner.stdin.flush()
        owner.communicate(timeout=60)
