"""Compile caches kept apart by the CPU vector ISA their kernels were generated for.

Inductor's graph cache and vLLM's compile cache are keyed by the code, the
shapes and the versions, not by the vector ISA inductor generated C++ for. A
graph generated under ``ATEN_CPU_CAPABILITY=avx2`` (8-float vectors) and loaded
by a native AVX-512 process is built with 16-float vectors and stores past its
buffers: the compiled passes aborted with ``malloc(): unaligned tcache chunk
detected``; the reverse order failed in vLLM's embedding (``index out of range``).
The same happens to a home directory shared by machines of different CPUs. So
each ISA gets directories of its own, unless the user chose them.
"""

from __future__ import annotations

import os

INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
VLLM_CACHE_ENV = "VLLM_CACHE_ROOT"


def cpu_kernel_key() -> str:
    """The vector ISA inductor generates CPU kernels for in this process (``avx2``,
    ``avx512-avx512_vnni``, ...; ``novec`` where it vectorises nothing)."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    from torch._inductor.exc import InvalidCxxCompiler

    try:
        isa = str(pick_vec_isa())
    except InvalidCxxCompiler:  # no C++ compiler: inductor builds no CPU kernels here
        return "novec"
    return "-".join(isa.split()) or "novec"


def key_compile_caches_by_cpu() -> str:
    """Point inductor's and vLLM's caches at directories of this process's vector ISA.

    Call before the first compile (``torch.compile``, a vLLM engine). A directory
    the user set is left alone; inductor's default (which inductor itself writes
    into the environment on first use) is not the user's choice. Returns the key.
    """
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    inductor_default = default_cache_dir()
    chosen = os.environ.get(INDUCTOR_CACHE_ENV)
    key = cpu_kernel_key()  # its probe may write inductor's default into the environment
    if chosen in (None, "", inductor_default):
        os.environ[INDUCTOR_CACHE_ENV] = f"{inductor_default}-{key}"
    if not os.environ.get(VLLM_CACHE_ENV):
        # vLLM's own default: $XDG_CACHE_HOME/vllm, else ~/.cache/vllm.
        root = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        os.environ[VLLM_CACHE_ENV] = os.path.join(root, f"vllm-{key}")
    return key
