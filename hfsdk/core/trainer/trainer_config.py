"""Configuration of the trainer loop (steps, seeds, logging, checkpoints)."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk.core.config.help import help_field
from hfsdk.core.config.paths import absolute_if_exists

BUILTIN_LOGGERS = ("console", "jsonl")
"""The metric sinks the core writes itself; others come from ``hfsdk_register_trackers``."""

LOGGERS = ("console", "jsonl", "tensorboard", "wandb")
"""The sinks of the core and the default plugins (what an imported config may keep)."""


@attrs.frozen(kw_only=True)
class TrainerConfig:
    """How long to train, how to log, when to validate and checkpoint."""

    def __attrs_post_init__(self) -> None:
        if (self.mode == "train_only") != (self.rollouts_from is not None):
            raise ValueError(
                f"trainer.mode={self.mode!r} with trainer.rollouts_from={self.rollouts_from!r}: "
                "train_only trains from the rollouts of a previous run and needs "
                "trainer.rollouts_from=<its run dir>; other modes take no rollouts_from"
            )
        if self.mode != "train" and self.pipeline != "sync":
            raise ValueError(
                f"trainer.mode={self.mode!r} runs with trainer.pipeline: sync, not "
                f"{self.pipeline!r} (nothing is generated ahead of an update there)"
            )
        if any(not 1 <= k <= self.val_n for k in self.val_k):
            raise ValueError(
                f"val_k={list(self.val_k)} has k outside 1..val_n={self.val_n}; pass@k needs "
                "k <= the samples per prompt (raise val_n or drop those k)"
            )

    total_steps: int = help_field(
        "Training steps (iterations of the algorithm's step()).",
        resumable=True,
        default=30,
        validator=attrs.validators.ge(1),
    )
    seed: int = help_field(
        "Seed of data order, sampling and initialisation (runs are reproducible); 0 to 2**32-1.",
        default=0,
        validator=[attrs.validators.ge(0), attrs.validators.le(2**32 - 1)],  # numpy's range
    )
    deterministic: bool = help_field(
        "Deterministic kernels everywhere (torch deterministic algorithms, no cuDNN "
        "autotuning, no TF32, fixed cuBLAS workspace and Python hash seed in the workers): "
        "two runs of one config give bitwise-identical metrics and weights. See "
        "docs/training.md#deterministic-runs.",
        default=False,
    )
    device: Literal["auto", "cpu", "cuda"] = help_field(
        "auto (CUDA when available), cpu or cuda: what the precision and memory checks assume; "
        "each role's own device (actor.device, ...) decides where it runs, so set those too.",
        default="auto",
        validator=attrs.validators.in_(("auto", "cpu", "cuda")),
    )
    loggers: tuple[str, ...] = help_field(
        "Metric sinks: console, jsonl (metrics.jsonl in the run dir) and those plugins "
        "register (`hfsdk list trackers`; tensorboard and wandb: hfsdk-plugin-tracking).",
        resumable=True,
        default=("console", "jsonl"),
    )
    save_every: int = help_field(
        "Checkpoint every N steps (and at the end); 0: only at the end.",
        resumable=True,
        default=0,
        validator=attrs.validators.ge(0),
    )
    rollout_dump: bool = help_field(
        "Write each step's samples (prompt, response, reward, multi-turn segments with tool "
        "calls) to RUN_DIR/rollouts/step_N.jsonl, and what replay and train_only need (the "
        "generations and the batch the update saw) to RUN_DIR/rollouts/step_N.pt. Needs "
        "the run-records plugin (hfsdk-plugin-run-records), as rollout_only and train_only do.",
        default=False,
    )
    mode: Literal["train", "rollout_only", "train_only"] = help_field(
        "train: generate, score and update. rollout_only: generate and score with the "
        "starting weights and write the rollouts (RUN_DIR/rollouts/), no update. train_only: "
        "train from the rollouts a previous run wrote (trainer.rollouts_from), no generation. "
        "See docs/training.md#debug-modes.",
        default="train",
        validator=attrs.validators.in_(("train", "rollout_only", "train_only")),
    )
    rollouts_from: str | None = help_field(
        "Under mode: train_only, the run directory whose rollouts/step_N.pt each step N "
        "trains from (written by mode: rollout_only or trainer.rollout_dump: true).",
        default=None,
        converter=absolute_if_exists,
    )
    val_every: int = help_field(
        "Validate (val_n samples per held-out prompt: mean@n, pass@k) every N steps; 0: never.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    val_before_train: bool = help_field(
        "Validate before the first step too (logged as step 0), also when val_every is 0.",
        default=False,
    )
    val_n: int = help_field(
        "Samples per validation prompt: 1 is greedy; more are sampled with the rollout's "
        "temperature.",
        default=1,
        validator=attrs.validators.ge(1),
    )
    val_k: tuple[int, ...] = help_field(
        "The k of pass@k (and maj@k) to report, each at most val_n; empty: 1, powers of two, "
        "val_n.",
        default=(),
        converter=tuple,
    )
    val_correct_threshold: float = help_field(
        "A validation sample is correct (for pass@k, maj@k) when its score is at least this.",
        default=1.0,
    )
    val_answer_pattern: str | None = help_field(
        "Regex of a response's answer (its last match) for maj@k; null: no maj@k.", default=None
    )
    keep_last: int = help_field(
        "Checkpoints to keep (the newest ones); 0: every one.",
        resumable=True,
        default=0,
        validator=attrs.validators.ge(0),
    )
    keep_best: str | None = help_field(
        "Also keep the checkpoint of the step with the highest value of this metric (e.g. "
        "val/pass@1; validate on save steps); null: none.",
        resumable=True,
        default=None,
    )
    val_samples: int = help_field(
        "Generations per validation written to RUN_DIR/validation/step_N.jsonl.",
        resumable=True,
        default=4,
        validator=attrs.validators.ge(0),
    )
    resume: bool = help_field(
        "Resume from the newest checkpoint in --run-dir, if any.", resumable=True, default=True
    )
    ray_address: str | None = help_field(
        "Ray cluster to join ('auto' or host:port); null starts a local instance.",
        resumable=True,
        default=None,
    )
    """Join this Ray cluster instead of starting a local one (also ``RAY_ADDRESS``)."""
    worker_timeout_s: float = help_field(
        "Seconds a worker call may take before the worker counts as stuck (reported with "
        "role and rank, then restarted like a dead one).",
        resumable=True,
        default=600.0,
        validator=[attrs.validators.gt(0.0), attrs.validators.lt(float("inf"))],
    )
    hf_export: Literal["end", "every_save"] = help_field(
        "When checkpoints also get the actor in HF format (actor_hf/): 'end' (the last "
        "checkpoint a run writes: its last step's, or the one written when SIGINT/SIGTERM "
        "stops it; `touch <run_dir>/EXPORT_HF` asks for it at the next save) or 'every_save'. "
        "`hfsdk export` exports any checkpoint later.",
        resumable=True,
        default="end",
        validator=attrs.validators.in_(("end", "every_save")),
    )
    max_restarts: int = help_field(
        "When a worker dies or misses its call deadline: tear the workers down, start them "
        "again and resume from the newest complete checkpoint, up to this many times. A "
        "rollout replica on placement.pools.rollout is restarted alone instead (the trainer "
        "keeps its state); that counts toward the same limit.",
        resumable=True,
        default=1,
        validator=attrs.validators.ge(0),
    )
    startup_timeout_s: float = help_field(
        "Deadline (s) for starting the workers and loading their models; 0: 120 s plus 60 s "
        "per GiB of the largest model's weight files.",
        resumable=True,
        default=0.0,
        validator=attrs.validators.ge(0.0),
    )
    executor: Literal["auto", "ray", "local"] = help_field(
        "Where workers run: ray (one process per device), local (in the controller's process; "
        "one device, fused roles) or auto (local exactly when the run fits it).",
        resumable=True,
        default="auto",
        validator=attrs.validators.in_(("auto", "ray", "local")),
    )
    """``local`` builds every role in the controller's process and calls it directly: no Ray,
    no worker start-up, no round trip per call. It needs one pool of one device on one node,
    fused colocation and no Ray cluster address. ``auto`` picks it exactly then; ``ray``
    always starts worker processes (worker faults are then survivable: ``max_restarts``)."""
    stop_grace_s: float = help_field(
        "On SIGTERM/SIGINT: seconds to finish the current step and write its checkpoint "
        "before the step is abandoned (the newest checkpoint then stands); 0: no limit.",
        resumable=True,
        default=20.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.lt(float("inf"))],
    )
    """Schedulers send SIGTERM, wait a grace period (SLURM ``KillWait`` and Kubernetes
    ``terminationGracePeriodSeconds`` default to 30 s) and then SIGKILL: keep this below theirs."""
    ray_allow_no_auth: bool = help_field(
        "Let hfsdk start its local Ray instance with token authentication off "
        "(RAY_AUTH_MODE=disabled); refused otherwise.",
        resumable=True,
        default=False,
    )
    pipeline: Literal["sync", "one_step_off", "async"] = help_field(
        "sync: each step generates from the weights it trains; one_step_off: the next step's "
        "batch is generated before this step's update (staleness 1); async: generation runs "
        "max_staleness steps ahead. See docs/async.md.",
        default="sync",
        validator=attrs.validators.in_(("sync", "one_step_off", "async")),
    )
    max_staleness: int = help_field(
        "Under pipeline: async, the most updates between the weights a batch was sampled "
        "with and the weights it trains.",
        default=2,
        validator=attrs.validators.ge(1),
    )
    partial_rollout_tokens: int = help_field(
        "Under pipeline: async with placement.pools.rollout: generate in segments of this "
        "many tokens so a weight update interrupts in-flight responses and they continue with "
        "the new weights (partial rollouts, tokens tagged with their policy version); 0: off.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    max_mismatch_kl: float | None = help_field(
        "Stop the run (after checkpointing the step) when mismatch/kl_k3, the K3 KL between "
        "the rollout's sampling policy and the trained one, exceeds this; null: no limit.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.gt(0.0)),
    )
    worker_threads: int = help_field(
        "Intra-op threads of each worker process; 0: the node's cores divided by its device "
        "slots, capped by the controller's OMP_NUM_THREADS.",
        default=0,
        validator=attrs.validators.ge(0),
    )
    """Intra-op threads of each worker process (0: auto, the node's cores divided by the
    device slots on it, capped by ``OMP_NUM_THREADS`` when the controller has it set)."""
