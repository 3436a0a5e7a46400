"""Inductor's and vLLM's compile caches are kept apart by the CPU vector ISA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch._inductor.runtime.cache_dir_utils import default_cache_dir

from hfsdk_backend_common import compile_caches
from hfsdk_backend_common.compile_caches import (
    INDUCTOR_CACHE_ENV,
    VLLM_CACHE_ENV,
    key_compile_caches_by_cpu,
)

_REPORT = (
    "import json, os\n"
    "from hfsdk_backend_common.compile_caches import key_compile_caches_by_cpu\n"
    "key = key_compile_caches_by_cpu()\n"
    "print(json.dumps({'key': key, 'inductor': os.environ['TORCHINDUCTOR_CACHE_DIR'],"
    " 'vllm': os.environ['VLLM_CACHE_ROOT']}))\n"
)


def _keyed_in_a_fresh_process(
    home: Path, capability: str | None, path: Path | None = None
) -> dict[str, str]:
    """The key and directories a fresh process picks, with no cache directory set (and
    only ``path`` to find programs in, where given)."""
    env = {k: v for k, v in os.environ.items() if k not in (INDUCTOR_CACHE_ENV, VLLM_CACHE_ENV)}
    env.pop("ATEN_CPU_CAPABILITY", None)
    env["XDG_CACHE_HOME"] = str(home)
    if path is not None:
        env.pop("CXX", None)
        env["PATH"] = str(path)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    done = subprocess.run(
        [sys.executable, "-c", _REPORT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.heavy  # two fresh processes, each compiling inductor's ISA probes
def test_a_run_forced_to_avx2_gets_other_caches_than_a_native_one(tmp_path: Path) -> None:
    """The native process and an ``ATEN_CPU_CAPABILITY=avx2`` one share caches only where
    inductor generates the same vectors for both (an AVX2-only machine)."""
    native = _keyed_in_a_fresh_process(tmp_path, None)
    avx2 = _keyed_in_a_fresh_process(tmp_path, "avx2")
    assert avx2["key"] == "avx2"
    assert avx2["inductor"] == f"{default_cache_dir()}-avx2"
    assert avx2["vllm"] == str(tmp_path / "vllm-avx2")
    same_vectors = native["key"] == avx2["key"]
    assert (native["inductor"] == avx2["inductor"]) is same_vectors
    assert (native["vllm"] == avx2["vllm"]) is same_vectors


def test_a_machine_without_a_cpp_compiler_is_keyed_not_refused(tmp_path: Path) -> None:
    """vLLM runs eager there; inductor's probe of the ISA needs a compiler it does not have."""
    no_tools = tmp_path / "bin"
    no_tools.mkdir()
    keyed = _keyed_in_a_fresh_process(tmp_path, None, path=no_tools)
    assert keyed["key"] == "novec"
    assert keyed["inductor"] == f"{default_cache_dir()}-novec"


@pytest.fixture
def probed_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fixed key in place of inductor's ISA probe (it compiles a program per ISA, seconds
    each; the fresh-process tests above run the real one): these tests are about where the
    directories go."""
    monkeypatch.setattr(compile_caches, "cpu_kernel_key", lambda: "avx512-probed")
    return "avx512-probed"


def test_directories_the_user_chose_are_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, probed_key: str
) -> None:
    monkeypatch.setenv(INDUCTOR_CACHE_ENV, str(tmp_path / "inductor"))
    monkeypatch.setenv(VLLM_CACHE_ENV, str(tmp_path / "vllm"))
    key_compile_caches_by_cpu()
    assert os.environ[INDUCTOR_CACHE_ENV] == str(tmp_path / "inductor")
    assert os.environ[VLLM_CACHE_ENV] == str(tmp_path / "vllm")


def test_inductors_default_is_keyed_and_keying_twice_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, probed_key: str
) -> None:
    """Inductor writes its default into the environment on first use: that is not a choice."""
    monkeypatch.setenv(INDUCTOR_CACHE_ENV, default_cache_dir())
    monkeypatch.delenv(VLLM_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = key_compile_caches_by_cpu()
    assert key == probed_key
    assert os.environ[INDUCTOR_CACHE_ENV] == f"{default_cache_dir()}-{key}"
    assert os.environ[VLLM_CACHE_ENV] == str(tmp_path / f"vllm-{key}")
    assert key_compile_caches_by_cpu() == key
    assert os.environ[INDUCTOR_CACHE_ENV] == f"{default_cache_dir()}-{key}"
