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

DETERMINISTIC_ENV = "HFSDK_DETERMINISTIC"
_CUBLAS = "CUBLAS_WORKSPACE_CONFIG"


def determinism_env(seed: int) -> dict[str, str]:
    """Environment variables the worker processes of a deterministic run start with."""
    return {DETERMINISTIC_ENV: "1", _CUBLAS: ":4096:8", "PYTHONHASHSEED": str(seed)}


def enable_determinism() -> None:
    """Deterministic kernels in this process (an op without one raises, naming itself)."""
    import torch

    os.environ.setdefault(_CUBLAS, ":4096:8")  # read by cuBLAS when its handle is created
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    # TF32 matmuls round differently from fp32 ones: identical across runs, but not the
    # precision asked for; keep the full one.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def disable_determinism() -> None:
    """Undo :func:`enable_determinism` (an in-process run gives the controller back)."""
    import torch

    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic = False


def apply_from_env() -> bool:
    """:func:`enable_determinism` when this worker process was started for a deterministic run."""
    if os.environ.get(DETERMINISTIC_ENV) != "1":
        return False
    enable_determinism()
    return True
