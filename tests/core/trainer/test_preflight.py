"""Start-up deadline: scaled to the weights the roles load, or set in the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import get_registry
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.preflight import (
    STARTUP_BASE_S,
    STARTUP_S_PER_GIB,
    startup_deadline_s,
    weight_bytes,
)
from hfsdk.core.trainer.session import RunAssets


def _model(path: Path, weight_bytes_: int) -> Path:
    path.mkdir()
    (path / "config.json").write_text("{}")
    with (path / "model.safetensors").open("wb") as handle:
        handle.truncate(weight_bytes_)  # sparse: no real disk use
    return path


def test_the_startup_deadline_grows_with_the_largest_model(tmp_path: Path) -> None:
    small = _model(tmp_path / "small", 2**20)
    big = _model(tmp_path / "big", 4 * 2**30)
    assert weight_bytes(big) == 4 * 2**30 and weight_bytes(tmp_path / "absent") == 0
    config = load_run_config(
        "grpo", None, [f"actor.model_path={small}", f"reference.model_path={big}"]
    )
    assets = RunAssets(
        model_path=str(small),
        tokenizer_path=str(small),
        train_files=(),
        val_files=(),
        default_task=False,
    )
    spec = get_registry("algorithms")["grpo"].impl
    deadline = startup_deadline_s(config, spec, assets)
    assert deadline == pytest.approx(STARTUP_BASE_S + 4 * STARTUP_S_PER_GIB)
    fixed = load_run_config("grpo", None, ["trainer.startup_timeout_s=42"])
    assert startup_deadline_s(fixed, spec, assets) == 42.0


def test_half_precision_on_a_cpu_without_native_kernels_is_warned_in_one_line(
    tmp_path: Path,
) -> None:
    from hfsdk.core.trainer.preflight import cpu_flags, precision_warning

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
