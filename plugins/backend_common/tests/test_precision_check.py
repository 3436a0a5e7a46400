"""The half-precision-on-CPU preflight warning (the training backends' dtype settings)."""

from __future__ import annotations

from pathlib import Path

from hfsdk import get_registry, load_run_config


def test_half_precision_on_a_cpu_without_native_kernels_is_warned_in_one_line(
    tmp_path: Path,
) -> None:
    from hfsdk_backend_common.precision_check import cpu_flags, precision_warning

    spec = get_registry("algorithms")["grpo"].impl
    bf16 = load_run_config("grpo", None, ["actor.dtype=bfloat16"])
    avx2_only = {"sse4_2", "avx", "avx2", "fma"}
    warning = precision_warning(bf16, spec, flags=avx2_only, cuda=False)
    assert warning is not None and "\n" not in warning
    assert warning.startswith("actor.dtype=bfloat16 on a CPU without native")
    assert "10-65x slower than float32" in warning
    # Native kernels, float32, a CUDA device: nothing to say.
    assert precision_warning(bf16, spec, flags={*avx2_only, "amx_bf16"}, cuda=False) is None
    assert precision_warning(bf16, spec, flags={*avx2_only, "avx512_bf16"}, cuda=False) is None
    fp32 = load_run_config("grpo", None, [])
    assert precision_warning(fp32, spec, flags=avx2_only, cuda=False) is None
    assert precision_warning(bf16, spec, flags=avx2_only, cuda=True) is None
    forced_cpu = load_run_config("grpo", None, ["actor.dtype=bfloat16", "trainer.device=cpu"])
    assert precision_warning(forced_cpu, spec, flags=avx2_only, cuda=True) is not None
    # The flags come from /proc/cpuinfo's "flags" line.
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_bf16\n")
    assert cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "amx_bf16"}
    assert cpu_flags(str(tmp_path / "absent")) is None


def test_the_check_is_registered() -> None:
    assert "half_precision_on_cpu" in get_registry("preflight_checks")
