"""The ``recorded_generations`` preflight check: a ``trainer.mode: train_only`` run must
train with the settings of the run whose rollouts it reads.

The dumped rollouts, not ``rollout.backend``, are what such a run trains on, so the
checks read step 1's dump: a correction (or ``trainer.max_mismatch_kl``) needs the
rollout log-probs it recorded, and the prompts per step and samples per prompt must
be the dumped run's (else the run's config.yaml records settings that did not apply).
They also count the dumps: the run may not be longer than the dumped one. A dumped run
that sampled nothing (SFT, DPO: their dumps hold no generations) has nothing to train from.
"""

from __future__ import annotations

from typing import Any

from hfsdk import HfsdkError, behaviour_log_probs_needed


def check_recorded_generations(config: Any, spec: Any = None, prepared: Any = None) -> None:
    """Refuse, before any worker starts, a ``train_only`` run its dumped rollouts do not fit."""
    from hfsdk_run_records.step_dump import read_step_dump

    del spec, prepared  # the check reads the config and the dump
    trainer = config.trainer
    if trainer.mode != "train_only" or not trainer.rollouts_from:
        return
    source = trainer.rollouts_from
    dump = read_step_dump(source, 1, for_what="trainer.mode=train_only")
    if not dump.generations:  # else step 1 failed, saying it drew more than the run did
        raise HfsdkError(
            f"trainer.mode=train_only: the run in {str(source)!r} sampled nothing (its step 1 "
            "dump holds no generations: an SFT or DPO run trains on its dataset); pass the run "
            "directory of a run that generated, made with trainer.rollout_dump: true or "
            "trainer.mode: rollout_only"
        )
    _check_dumped_length(source, int(trainer.total_steps))
    prompts, generated = dump.generations[0]
    where = f"the rollouts in {str(source)!r}"
    if behaviour_log_probs_needed(config) and "rollout_log_probs" not in generated:
        raise HfsdkError(
            f"trainer.mode=train_only: rollout corrections / trainer.max_mismatch_kl read the "
            f"rollout log-probs, which {where} do not hold (their run's rollout backend "
            "reported none); record them with rollout.backend=vllm, or drop the setting"
        )
    size = int(config.data.batch_size)
    n = getattr(config.algorithm, "n_samples_per_prompt", None)
    dumped_n = len(generated) // max(len(prompts), 1)
    if len(prompts) != size or (
        n is not None and "segment_index" not in generated and dumped_n != n
    ):
        raise HfsdkError(
            f"trainer.mode=train_only: {where} have {len(prompts)} prompts x {dumped_n} samples "
            f"a step, this run data.batch_size={size}"
            f"{f' x algorithm.n_samples_per_prompt={n}' if n is not None else ''}; train with the "
            "data and algorithm settings of the run that wrote them"
        )


def _check_dumped_length(source: Any, total_steps: int) -> None:
    """Refuse a run longer than the dumped one before it starts (it failed at the first
    step past the dump, its trained steps lost when nothing was checkpointed yet).

    The dumps are counted from step 1: a fresh run starts there, and a resumed one (at its
    checkpoint's step + 1) needs a subset of steps 1..total_steps, whose step 1 the
    settings check reads anyway.
    """
    from hfsdk_run_records.step_dump import dumped_steps

    last = dumped_steps(source)
    if last < total_steps:
        raise HfsdkError(
            f"trainer.mode=train_only: the run in {str(source)!r} dumped {last} steps "
            f"(rollouts/step_1.pt..step_{last}.pt), this run trainer.total_steps={total_steps}; "
            f"lower trainer.total_steps to {last}, or dump a longer run to train from"
        )
