"""``trainer.deterministic: true``: the same config gives bitwise-identical runs.

hfsdk seeds every random stream already (data order, initialisation, sampling: each
generation call carries a seed) and its reductions run in a fixed order for a fixed
layout. What is left to chance lives in the kernels: cuDNN's autotuner picks kernels by
timing, cuBLAS and some CUDA ops (scatter-add, index-add, atomics in backward passes)
accumulate in whatever order threads finish, and Python's string hashing (set and dict
order of strings) differs per process. :func:`enable_determinism` turns all of that off
in the process that calls it; the workers get :func:`determinism_env` in their
environment and call :func:`apply_from_env` when they start.

On a CPU the kernels hfsdk uses are already deterministic for a fixed thread count, so
the switch costs little there; on a GPU deterministic kernels are slower (see
docs/training.md#deterministic-runs for what it cost here).
"""

from __future__ import annotations

import os
from typing import Any

DETERMINISTIC_ENV = "HFSDK_DETERMINISTIC"
_CUBLAS = "CUBLAS_WORKSPACE_CONFIG"


def determinism_env(seed: int) -> dict[str, str]:
    """Environment variables the worker processes of a deterministic run start with."""
    return {DETERMINISTIC_ENV: "1", _CUBLAS: ":4096:8", "PYTHONHASHSEED": str(seed)}


_FOUND: list[tuple[Any, ...]] = []  # what the first enable found, till its disable


def enable_determinism() -> None:
    """Deterministic kernels in this process (an op without one raises, naming itself); the
    first call keeps what it found for :func:`disable_determinism` (a restart calls it again)."""
    import torch

    b = torch.backends
    if not _FOUND:
        _FOUND.append((torch.are_deterministic_algorithms_enabled(),
                       torch.is_deterministic_algorithms_warn_only_enabled(), b.cudnn.deterministic,
                       b.cudnn.benchmark, b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32,
                       os.environ.get(_CUBLAS)))  # fmt: skip
    os.environ.setdefault(_CUBLAS, ":4096:8")  # read by cuBLAS when its handle is created
    torch.use_deterministic_algorithms(True)
    b.cudnn.deterministic, b.cudnn.benchmark = True, False
    # TF32 matmuls round differently from fp32 ones: identical across runs, but not the
    # precision asked for; keep the full one.
    b.cuda.matmul.allow_tf32 = b.cudnn.allow_tf32 = False


def disable_determinism() -> None:
    """Give back every setting :func:`enable_determinism` changed, as it found them (an
    in-process run gives the controller back: tests, notebooks)."""
    import torch

    if not _FOUND:  # never enabled: nothing to give back
        return
    on, warn_only, deterministic, benchmark, tf32, cudnn_tf32, cublas = _FOUND.pop()
    b = torch.backends
    b.cudnn.deterministic, b.cudnn.benchmark = deterministic, benchmark
    b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = tf32, cudnn_tf32
    torch.use_deterministic_algorithms(on, warn_only=warn_only)
    if cublas is None:
        os.environ.pop(_CUBLAS, None)
    else:
        os.environ[_CUBLAS] = cublas


def apply_from_env() -> bool:
    """:func:`enable_determinism` when this worker process was started for a deterministic run."""
    if os.environ.get(DETERMINISTIC_ENV) != "1":
        return False
    enable_determinism()
    return True
