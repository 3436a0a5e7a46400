"""A warning before a run starts: half-precision compute asked for on a CPU that emulates it.

The ``dtype`` fields are the training backends' role settings (``actor.dtype``,
``critic.dtype``, a reward model's ``reward.model.dtype``), so the check is theirs:
registered as the ``half_precision_on_cpu`` preflight check.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs


def model_sections(config: Any, spec: Any) -> dict[str, Any]:
    """Each model role's section by its config key (a scorer role's ``model`` sub-section)."""
    out = {}
    for role in spec.role_names:
        section = getattr(config, role, None)
        if spec.kind_of(role) == "scorer":
            section = getattr(section, "model", None)
            role = f"{role}.model"
        if section is not None:
            out[role] = section
    return out


NATIVE_HALF_FLAGS = {
    "bfloat16": ("amx_bf16", "avx512_bf16"),
    "float16": ("amx_fp16", "avx512_fp16"),
}
"""CPU flags (``/proc/cpuinfo``) of native support for each half-precision compute dtype."""


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The CPU's feature flags (``None`` where ``/proc/cpuinfo`` cannot be read)."""
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return set()


def _dtype_settings(section: Any, prefix: str) -> Iterator[tuple[str, str]]:
    """``(key, value)`` of every ``dtype`` field in an attrs section and its sub-sections."""
    if not attrs.has(type(section)):
        return
    for field in attrs.fields(type(section)):
        value = getattr(section, field.name)
        if field.name == "dtype" and isinstance(value, str):
            yield f"{prefix}.dtype", value
        elif attrs.has(type(value)):
            yield from _dtype_settings(value, f"{prefix}.{field.name}")


def precision_warning(
    config: Any,
    spec: Any,
    *,
    flags: set[str] | None = None,
    cuda: bool | None = None,
) -> str | None:
    """One line when bf16/fp16 compute is asked for on a CPU that only emulates it.

    Without AMX or AVX512-BF16 (FP16) kernels, PyTorch runs half-precision
    matrix products through float32 conversions: measured 10x (an MLP pass,
    ``benchmarks/bf16_cpu.py``) to 65x (a GRPO update) slower than float32
    (docs/reliability.md#precision-on-cpu).
    ``flags`` / ``cuda`` default to this machine's.
    """
    if config.trainer.device == "cuda":
        return None
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    if cuda and config.trainer.device == "auto":
        return None
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return None
    slow = [
        f"{key}={value}"
        for name, section in model_sections(config, spec).items()
        for key, value in _dtype_settings(section, name)
        if value in NATIVE_HALF_FLAGS and not flags.intersection(NATIVE_HALF_FLAGS[value])
    ]
    if not slow:
        return None
    return (
        f"{', '.join(slow)} on a CPU without native half-precision kernels (no AMX / "
        "AVX512-BF16 / AVX512-FP16 flag in /proc/cpuinfo): it is emulated, measured 10-65x "
        "slower than float32 (docs/reliability.md#precision-on-cpu); set float32 there"
    )


def half_precision_on_cpu(config: Any, spec: Any, prepared: Any) -> str | None:
    """The preflight check: :func:`precision_warning` on this machine."""
    return precision_warning(config, spec)
