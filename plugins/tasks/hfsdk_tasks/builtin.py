"""The :class:`hfsdk.Task` of the built-in addition task, as the task registry holds it."""

from __future__ import annotations

from typing import Any

import attrs

from hfsdk import Task, TaskAssets
from hfsdk_tasks.assets import ensure_default_assets
from hfsdk_tasks.spec import DefaultTaskSpec
from hfsdk_tasks.task import COST_FUNCTION_NAME, REWARD_FUNCTION_NAME

CORE_PRESET: dict[str, Any] = {
    "trainer": {"total_steps": 30},
    "data": {"batch_size": 16},
}
"""The default task's settings of the core's own sections, for every algorithm."""

WARM_START_STEPS = {"warm": None, "cold": 0, "partial": 30}
"""Model variants: warm-start steps (``None``: the spec's 160). ``cold`` is freshly
initialised (programs that make the warm start themselves, e.g. SFT); ``partial`` is
less trained (a distillation student that has not yet learned the teacher's answers)."""


def addition_assets(model: str = "warm", data: str = "prompts") -> TaskAssets:
    """The addition task's paths for a model variant and a data kind (built on first use).

    The tokenizer and data always come from the warm build (the variants share them);
    ``preference_pairs`` are the right answer chosen over a wrong one
    (:mod:`hfsdk_tasks.pairs`).
    """
    base = ensure_default_assets()
    steps = WARM_START_STEPS[model]
    built = (
        base
        if steps is None
        else ensure_default_assets(attrs.evolve(base.spec, warm_start_steps=steps))
    )
    train, val = base.train_jsonl, base.val_jsonl
    if data == "preference_pairs":
        from hfsdk_tasks.pairs import ensure_preference_pairs

        train, val = ensure_preference_pairs(base)
    return TaskAssets(
        model_dir=built.model_dir,
        tokenizer_dir=base.tokenizer_dir,
        train_files=(str(train),),
        val_files=(str(val),),
        root=base.root,
        spec=base.spec,
    )


def addition_model_config(model: str = "warm") -> dict[str, Any]:
    """The ``config.json`` values of the addition task's model (every variant has the same
    shape), from its spec: nothing is built."""
    spec = DefaultTaskSpec()
    return {
        "model_type": "llama",
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_heads,
        "intermediate_size": spec.intermediate_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "hidden_act": "silu",
    }


ADDITION_TASK = Task(
    summary="single-digit addition with a tiny warm-started Llama (reward: right answer; "
    "cost: the filler word), docs/default_task.md",
    assets=addition_assets,
    models=tuple(WARM_START_STEPS),
    data=("prompts", "preference_pairs"),
    preset=CORE_PRESET,
    signals={"reward": (REWARD_FUNCTION_NAME,), "cost": (COST_FUNCTION_NAME,)},
    model_config=addition_model_config,
)
"""The ``default`` task: what ``hfsdk run --algo X`` trains when given nothing else."""
