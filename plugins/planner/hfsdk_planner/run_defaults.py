"""What a run of an algorithm draws with its defaults, for ``hfsdk plan`` without a run."""

from __future__ import annotations


def default_samples_per_prompt(algo: str) -> int:
    """Responses per prompt that ``hfsdk run --algo ALGO`` samples with no config.

    Read from the algorithm's resolved run config (its config class and its
    default-task preset), so ``hfsdk plan --algo grpo`` prices grpo's groups
    rather than one sample per prompt. ``rollout.n`` multiplies it, as in a run.
    """
    from hfsdk import load_run_config

    config = load_run_config(algo)
    # An algorithm that samples nothing (a reward model on given pairs) has no such field.
    samples = int(getattr(config.algorithm, "n_samples_per_prompt", 1))
    return samples * max(1, int(getattr(config.rollout, "n", 1) or 1))
