"""``hfsdk sandbox run``: programs written to escape — each first switching off the in-process
guard — neither read, write, signal, connect nor outlive the sandbox; the result always comes
back as JSON within the deadline. Meaningful as root (CI, this machine): there a program that
gets out can do anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hfsdk.core.cli.main import main
from hfsdk_sandbox.bwrap import unavailable_reason
from hfsdk_sandbox.cgroup import make_pids_cgroup
from hfsdk_sandbox.testing import DISARM_GUARD as DISARM

pytestmark = pytest.mark.skipif(
    unavailable_reason() is not None, reason=f"bubblewrap cannot start: {unavailable_reason()}"
)
HFSDK = str(Path(sys.executable).with_name("hfsdk"))


def _sandbox_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, code: str, *extra: str
) -> dict:
    program = tmp_path / "escape.py"
    program.write_text(DISARM + code)
    with pytest.raises(SystemExit) as info:
        main(["sandbox", "run", str(program), "--json", "--wall-s", "5", *extra])
    out, _ = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert set(result) == {"status", "returncode", "stdout", "stderr", "seconds", "reason"}
    assert info.value.code in ((0, None) if result["status"] == "ok" else (1,)), result
    assert "guard disarmed" in result["stdout"], result
    return result


def test_an_honest_program_runs_with_its_stdin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "in.txt").write_text("20 22\n")
    (tmp_path / "p.py").write_text("a, b = map(int, input().split())\nprint(a + b)\n")
    with pytest.raises(SystemExit) as info:
        main(["sandbox", "run", str(tmp_path / "p.py"), "--stdin", str(tmp_path / "in.txt")])
    out, err = capsys.readouterr()
    assert out == "42\n" and "sandbox: ok" in err and info.value.code in (0, None)


@pytest.mark.parametrize(
    ("code", "reason"),
    [("import sys\nsys.exit(3)\n", "exit status 3"), ("while True:\n    pass\n", "timeout")],
)
def test_a_program_that_fails_or_times_out_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, code: str, reason: str
) -> None:
    (tmp_path / "p.py").write_text(code)
    with pytest.raises(SystemExit) as info:  # before, click's status was dropped: 0
        main(["sandbox", "run", str(tmp_path / "p.py"), "--wall-s", "1"])
    assert info.value.code == 1 and reason in capsys.readouterr().err


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("print('fine')\n", "ok"),
        ("import sys\nsys.exit(3)\n", "error"),
        ("import os\nos._exit(137)\n", "error"),  # bwrap's 128 + 9: was `timeout`
        ("while True:\n    pass\n", "timeout"),
    ],
    ids=["ok", "exit-3", "exit-137", "timeout"],
)
def test_with_json_the_exit_status_is_1_unless_ok_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, code: str, status: str
) -> None:
    (tmp_path / "p.py").write_text(code)
    with pytest.raises(SystemExit) as info:  # before, --json always exited 0
        main(["sandbox", "run", str(tmp_path / "p.py"), "--json", "--wall-s", "1"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["status"] == status, result
    assert (info.value.code or 0) == (0 if status == "ok" else 1)


def test_an_endless_wall_limit_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "p.py").write_text("print(1)\n")
    for value in ("inf", "1e300"):  # before: an internal OverflowError
        with pytest.raises(SystemExit) as info:
            main(["sandbox", "run", str(tmp_path / "p.py"), "--wall-s", value])
        assert info.value.code == 2 and "must be <= 86400" in capsys.readouterr().err


def test_a_fifo_or_device_as_input_is_refused_not_waited_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "p.py").write_text("print(len(input()))\n")
    os.mkfifo(tmp_path / "fifo")
    for source in ("/dev/zero", str(tmp_path / "fifo")):
        with pytest.raises(SystemExit) as info:
            main(["sandbox", "run", str(tmp_path / "p.py"), "--stdin", source])
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("\n") == 1 and "not a regular file" in err


def test_the_callers_environment_is_out_of_reach(tmp_path: Path) -> None:
    # A real CLI process with the secret in its environment from exec: /proc/<pid>/environ
    # of it (the trainer, in a run) would show the secret to anything that can read it.
    secret = "sk-hfsdk-" + os.urandom(8).hex()
    program = tmp_path / "env.py"
    program.write_text(
        DISARM + "import os, glob, re\n"
        "print(dict(os.environ))\n"
        "for p in glob.glob('/proc/*/environ') + glob.glob('/proc/*/task/*/environ'):\n"
        "    try:\n"
        "        print(p, re.findall(rb'HFSDK_ESCAPE_SECRET=[^\\0]*', open(p, 'rb').read()))\n"
        "    except OSError as e:\n"
        "        print(p, e)\n"
    )
    env = {**os.environ, "HFSDK_ESCAPE_SECRET": secret}
    done = subprocess.run(
        [HFSDK, "sandbox", "run", str(program), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "guard disarmed" in result["stdout"]
    assert "/proc/1/environ" in result["stdout"]  # it did look
    assert secret not in done.stdout + done.stderr


def test_root_only_files_cannot_be_read_or_linked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    secret = "root-only-" + os.urandom(8).hex()
    target = tmp_path / "key.pem"
    target.write_text(secret)
    target.chmod(0o600)
    code = (
        "import os, glob\n"
        f"target = {str(target)!r}\n"
        "for p in [target, '/proc/1/root' + target, *glob.glob('/proc/*/root' + target)]:\n"
        "    try:\n"
        "        print(open(p).read())\n"
        "    except OSError as e:\n"
        "        print('read', p, e)\n"
        "try:\n"
        "    os.link(target, 'stolen')\n"
        "    print(open('stolen').read())\n"
        "except OSError as e:\n"
        "    print('link', e)\n"
        "print(sorted(os.listdir('/')))\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    assert result["status"] == "ok", result
    assert secret not in result["stdout"] + result["stderr"]
    assert "'etc'" not in result["stdout"] and "'home'" not in result["stdout"]


def test_nothing_is_written_outside(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    code = (
        "import os\n"
        f"d = {str(outside)!r}\n"
        "tries = [\n"
        "    lambda: open(d + '/plain', 'w').write('x'),\n"
        "    lambda: os.open('dirfd', os.O_CREAT | os.O_WRONLY, dir_fd=os.open(d, os.O_RDONLY)),\n"
        "    lambda: os.mkdir('dirfd_dir', dir_fd=os.open(d, os.O_RDONLY)),\n"
        "    lambda: os.mkfifo(d + '/fifo'),\n"
        "    lambda: os.symlink('/etc/passwd', d + '/link'),\n"
        "    lambda: open('/proc/1/root' + d + '/viaproc', 'w').write('x'),\n"
        "]\n"
        "for t in tries:\n"
        "    try:\n"
        "        t()\n"
        "        print('wrote')\n"
        "    except OSError as e:\n"
        "        print('refused', e)\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    assert result["status"] == "ok", result
    assert list(outside.iterdir()) == []


def test_processes_outside_cannot_be_signalled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        code = (
            "import os, signal\n"
            f"pid = {victim.pid}\n"
            "for t in (lambda: os.kill(pid, signal.SIGKILL),\n"
            "          lambda: signal.pidfd_send_signal(os.pidfd_open(pid), signal.SIGKILL)):\n"
            "    try:\n"
            "        t()\n"
            "        print('sent')\n"
            "    except OSError as e:\n"
            "        print('refused', e)\n"
        )
        result = _sandbox_run(capsys, tmp_path, code)
        time.sleep(0.2)
        assert victim.poll() is None, result
    finally:
        victim.kill()
        victim.wait()


def test_loopback_services_cannot_be_reached_even_through_setns(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, loopback_listener: Callable[[float], Any]
) -> None:
    listener = loopback_listener(8)
    port = listener.port
    code = (
        "import ctypes, glob, os, socket\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for ns in glob.glob('/proc/*/ns/net'):\n"
        "    fd = os.open(ns, os.O_RDONLY)\n"
        "    print('setns', ns, libc.setns(fd, 0), ctypes.get_errno())\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n"
        "    print('connected')\n"
        "except OSError as e:\n"
        "    print('refused', e)\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    assert not listener.finish(), result
    assert "connected" not in result["stdout"]


def _comm_holders(name: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                pids.append(int(entry.name))
    return pids


def test_nothing_outlives_the_sandbox(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    mark = "hfsdk" + os.urandom(4).hex()
    code = (
        "import os, time, subprocess, sys\n"
        "def linger():\n"
        f"    open('/proc/self/comm', 'w').write({mark!r})\n"
        "    time.sleep(30)\n"
        "try:\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            linger()\n"
        "        os._exit(0)\n"
        "    print('forked')\n"
        "except OSError as e:\n"
        "    print('fork refused', e)\n"
        "try:\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'],\n"
        "                     start_new_session=True)\n"
        "    print('spawned')\n"
        "except OSError as e:\n"
        "    print('spawn refused', e)\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    time.sleep(0.5)
    survivors = _comm_holders(mark)
    for pid in survivors:  # what a broken sandbox left behind is ours to end
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert survivors == [], result
    assert "fork refused" in result["stdout"] and "spawn refused" in result["stdout"]


def test_it_runs_as_nobody_without_a_shell_or_capabilities(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = (
        "import os, ctypes\n"
        "print('uid', os.getuid(), ctypes.CDLL(None).geteuid())\n"
        "print('system', os.system('id > /box/id.txt'))\n"
        "print('caps', [l for l in open('/proc/self/status') if l.startswith('CapEff')])\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    assert "uid 65534 65534" in result["stdout"], result
    assert "CapEff:\\t0000000000000000" in result["stdout"]
    assert "uid=0" not in result["stdout"]


def test_process_and_thread_bombs_hit_the_cap(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = (
        "import os, threading, time\n"
        "forks = 0\n"
        "for _ in range(50):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(3)\n"
        "            os._exit(0)\n"
        "        forks += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "threading.stack_size(64 * 1024)\n"
        "threads = 0\n"
        "for _ in range(300):\n"
        "    try:\n"
        "        threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n"
        "        threads += 1\n"
        "    except RuntimeError:\n"
        "        break\n"
        "print('forks', forks, 'threads', threads, flush=True)\n"
        "os._exit(0)\n"
    )
    result = _sandbox_run(capsys, tmp_path, code, "--wall-s", "10")
    assert "forks 0 " in result["stdout"], result
    threads = int(result["stdout"].split("threads")[1].split()[0])
    probe = make_pids_cgroup(8)
    if probe is None:
        pytest.skip("no pids cgroup can be made here: threads are bounded by memory only")
    probe.remove()
    assert 1 <= threads < 32, result  # SandboxLimits.max_tasks


def test_namespace_and_tracing_calls_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import platform

    from hfsdk_sandbox import seccomp

    column = 0 if platform.machine() in ("x86_64", "amd64") else 1
    calls = {
        n: seccomp._SYSCALLS[n][column]
        for n in (
            "unshare",
            "setns",
            "mount",
            "ptrace",
            "bpf",
            "keyctl",
            "perf_event_open",
            "process_vm_readv",
            "io_uring_setup",
            "memfd_create",
            "shmget",
            "msgget",
            "semget",
        )
    }
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        f"for name, nr in {calls!r}.items():\n"
        "    ctypes.set_errno(0)\n"
        "    rc = libc.syscall(ctypes.c_long(nr), ctypes.c_long(0x10000000), 0, 0, 0, 0)\n"
        "    print(name, rc, ctypes.get_errno())\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    for name in calls:
        assert f"{name} -1 1\n" in result["stdout"], (name, result["stdout"])


def test_the_program_is_the_only_process_in_its_pid_namespace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # bwrap's own init (pid 1, same uid, none of the guard's limits) could be rewritten through
    # /proc/1/mem: with --as-pid-1 the program is pid 1 and there is no other process to reach.
    code = (
        "import os\n"
        "print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        "print('me', os.getpid())\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    assert result["status"] == "ok", result
    assert "pids [1]\n" in result["stdout"] and "me 1\n" in result["stdout"], result["stdout"]


@pytest.mark.parametrize("trick", ["symlink", "fifo", "devzero"])
def test_files_left_in_the_scratch_dir_are_never_read_back(tmp_path: Path, trick: str) -> None:
    secret = "never-" + os.urandom(8).hex()
    target = tmp_path / "secret.txt"
    target.write_text(secret)
    target.chmod(0o600)
    make = {
        "symlink": f"os.symlink({str(target)!r}, name)",
        "fifo": "os.mkfifo(name)",
        "devzero": "os.symlink('/dev/zero', name)",
    }[trick]
    program = tmp_path / "trick.py"
    program.write_text(
        DISARM + "import os\n"
        "for name in ('.stdout', '.stderr', 'stdout', 'stderr'):\n"
        "    try:\n"
        "        os.remove(name)\n"
        "    except OSError:\n"
        "        pass\n"
        f"    {make}\n"
        "print('done')\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [HFSDK, "sandbox", "run", str(program), "--json", "--wall-s", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok" and result["stdout"].endswith("done\n"), result
    assert secret not in done.stdout
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "code",
    [
        "import os\nwhile True:\n    os.write(2, b'e' * 65536)",
        "import os, sys\nsys.stdout.write('o' * 10**7)",
    ],
    ids=["stderr-flood", "stdout-flood"],
)
def test_output_is_cut_at_the_byte_cap(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, code: str
) -> None:
    result = _sandbox_run(capsys, tmp_path, code, "--output-bytes", "4096")
    assert result["status"] == "output_limit", result["reason"]
    assert len(result["stdout"]) <= 4096 and len(result["stderr"]) <= 4096
    assert result["seconds"] < 5


def test_the_cli_returns_within_its_deadline_for_a_program_that_never_ends(
    tmp_path: Path,
) -> None:
    program = tmp_path / "forever.py"
    program.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    started = time.monotonic()
    done = subprocess.run(
        [HFSDK, "sandbox", "run", str(program), "--json", "--wall-s", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "timeout"
    assert 2 <= result["seconds"] < 4
    assert time.monotonic() - started < 20  # interpreter start-up on a loaded machine


def test_a_missing_program_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["sandbox", "run", str(tmp_path / "nope.py")])
    _, err = capsys.readouterr()
    assert info.value.code == 2 and err.count("\n") == 1 and "does not exist" in err


def test_the_python_tools_limits_are_one_option_away(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    program = tmp_path / "big.py"
    program.write_text("print('x' * 9000)\n")  # over the tool's 8 KiB, under code_tests' 64 KiB
    statuses = []
    for preset in ("python", "code_tests"):
        with pytest.raises(SystemExit):
            main(["sandbox", "run", str(program), "--json", "--limits", preset])
        out, _ = capsys.readouterr()
        statuses.append(json.loads(out.strip().splitlines()[-1])["status"])
    assert statuses == ["output_limit", "ok"]


def test_host_kernel_settings_and_devices_cannot_be_changed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # As root, uid 65534 in the sandbox was host uid 0: /proc/sys took writes, /dev/null a chmod.
    code = (
        "import os\n"
        "print(open('/proc/self/uid_map').read().split())\n"
        "for t in (lambda: os.close(os.open('/proc/sys/vm/swappiness', os.O_WRONLY)),\n"
        "          lambda: os.chmod('/dev/null', os.stat('/dev/null').st_mode & 0o7777)):\n"
        "    try:\n"
        "        t()\n"
        "        print('changed')\n"
        "    except OSError as e:\n"
        "        print('refused', e)\n"
        "print('devnull', open('/dev/null', 'w').write('abc'))\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    assert result["stdout"].count("refused") == 2, result
    assert "changed" not in result["stdout"] and "devnull 3" in result["stdout"]


def test_memory_outside_the_limits_cannot_be_filled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import sysconfig

    site = os.path.join(
        sysconfig.get_paths(vars={"base": sys.base_prefix})["stdlib"], "site-packages"
    )
    code = (
        "import os\n"
        f"for p in ('/dev/shm/x', '/dev/x', {site + '/x'!r}):\n"
        "    try:\n"
        "        open(p, 'w').write('a')\n"
        "        print('wrote', p)\n"
        "    except OSError as e:\n"
        "        print('refused', e)\n"
        "fds = []\n"
        "try:\n"
        "    for _ in range(2000):\n"
        "        fd = os.memfd_create('x')\n"
        "        os.write(fd, b'm' * 65536)\n"
        "        fds.append(fd)\n"
        "    print('memfds', len(fds))\n"
        "except OSError as e:\n"
        "    print('memfd refused', len(fds), e)\n"
        "print('box', open('/box/x', 'w').write('a'))\n"
    )
    result = _sandbox_run(capsys, tmp_path, code)
    assert "wrote" not in result["stdout"] and "memfd refused" in result["stdout"], result
    assert "box 1" in result["stdout"]


def test_the_callers_home_and_its_root_only_files_stay_out_of_reach(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # As root with Python under a 0700 /root (pyenv, conda in ~), bubblewrap gets the
    # interpreter through mounts staged in a private namespace: /root itself, a root-only file
    # in it and the staging directory must stay out of the sandbox, and no mount may remain.
    import tempfile

    home = Path.home()
    if not os.access(home, os.W_OK):
        pytest.skip(f"{home} is not writable here")
    secret = "home-only-" + os.urandom(8).hex()
    fd, name = tempfile.mkstemp(dir=home, prefix=".hfsdk-sandbox-test-")
    try:
        os.write(fd, secret.encode())
        os.close(fd)  # mkstemp: mode 0600
        code = (
            "import os\n"
            f"name = {name!r}\n"
            "for p in [name, '/proc/1/root' + name, '/proc/self/root' + name]:\n"
            "    try:\n"
            "        print(open(p).read())\n"
            "    except OSError as e:\n"
            "        print('read', e)\n"
            f"for d in ({str(home)!r}, '/tmp', '/proc/1/root/tmp'):\n"
            "    try:\n"
            "        print(d, sorted(os.listdir(d)))\n"
            "    except OSError as e:\n"
            "        print('list', e)\n"
            "print([line for line in open('/proc/self/mountinfo') if 'hfsdk-sandbox' in line])\n"
        )
        result = _sandbox_run(capsys, tmp_path, code)
    finally:
        os.unlink(name)
    assert result["status"] == "ok", result
    assert secret not in result["stdout"] + result["stderr"]
    listing = [line for line in result["stdout"].splitlines() if line.startswith(f"{home} [")]
    assert not listing or os.path.basename(name) not in listing[0], result
    prefix = Path(os.path.realpath(sys.base_exec_prefix))
    if prefix.is_relative_to(home):  # only the directories leading to the interpreter are there
        assert listing == [f"{home} [{prefix.relative_to(home).parts[0]!r}]"], result
    assert "list [Errno 2]" in result["stdout"] and result["stdout"].endswith("[]\n"), result
    assert "hfsdk-sandbox" not in Path("/proc/self/mountinfo").read_text()
