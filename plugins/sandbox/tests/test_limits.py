"""``SandboxLimits`` takes whole numbers where the kernel limits need them."""

from __future__ import annotations

import pytest

from hfsdk_sandbox import SandboxLimits


@pytest.mark.parametrize("field", ["cpu_s", "memory_mb", "output_bytes", "max_tasks", "scratch_mb"])
@pytest.mark.parametrize("value", [512.0, True, "512"])
def test_integer_limits_refuse_other_types_with_a_clear_message(field: str, value: object) -> None:
    # A float or bool was accepted, then every run failed with "invalid literal for int()".
    with pytest.raises(TypeError, match=f"{field} must be an integer"):
        SandboxLimits(**{field: value})


def test_integers_and_a_float_wall_clock_are_fine() -> None:
    limits = SandboxLimits(wall_s=2, cpu_s=3, memory_mb=128, scratch_mb=8)
    assert (limits.cpu_s, limits.memory_mb, limits.scratch_mb) == (3, 128, 8)


@pytest.mark.parametrize(
    ("field", "value"), [("cpu_s", 2**63), ("memory_mb", 2**50), ("scratch_mb", 2**45)]
)
def test_limits_too_large_for_the_kernel_are_refused_with_their_bound(
    field: str, value: int
) -> None:
    # They were accepted, then every run failed with an OverflowError or a bubblewrap error.
    with pytest.raises(ValueError, match=f"'{field}' must be <= "):
        SandboxLimits(**{field: value})
