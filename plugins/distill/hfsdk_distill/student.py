"""The default task's distillation pair: the warm-started teacher and a less-trained student.

Both come from the task registry's default task (same tokenizer, same data): the
teacher is its ``warm`` model, the student its ``partial`` one, the same tiny
model warm-started for fewer steps (30 instead of 160 for the built-in addition
task), so it has not yet learned the teacher's answer distribution. Each is
built once and cached by the task.
"""

from __future__ import annotations

STUDENT_MODEL = "partial"
"""The default task's model variant the student starts from (``hfsdk.Task.models``)."""


def teacher_model_path() -> str:
    """The warm-started default model's directory (built on first use)."""
    from hfsdk import default_model_dir

    return str(default_model_dir())


def student_model_path() -> str:
    """The less-trained copy's directory (built on first use)."""
    from hfsdk import default_model_dir

    return str(default_model_dir(STUDENT_MODEL))
