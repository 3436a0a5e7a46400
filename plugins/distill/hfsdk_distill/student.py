"""The default task's distillation pair: the warm-started teacher and a less-trained student.

Both come from the built-in task's builder (same tokenizer, same data); the
student is the same tiny model warm-started for :data:`STUDENT_WARM_START_STEPS`
steps instead of the default 160, so it has not yet learned the teacher's
answer distribution. Each is built once and cached like the default task.
"""

from __future__ import annotations

STUDENT_WARM_START_STEPS = 30


def teacher_model_path() -> str:
    """The warm-started default model's directory (built on first use)."""
    from hfsdk import ensure_default_assets

    return str(ensure_default_assets().model_dir)


def student_model_path() -> str:
    """The less-trained copy's directory (built on first use)."""
    from hfsdk import DefaultTaskSpec, ensure_default_assets

    spec = DefaultTaskSpec(warm_start_steps=STUDENT_WARM_START_STEPS)
    return str(ensure_default_assets(spec).model_dir)
