"""The training backend's fixed costs, fitted from short runs of it (part of ``hfsdk calibrate``).

Matmuls and a transformers step do not see what a real update adds: the
policy loss's small ops, sharding hooks, gradient clipping, optimizer and
metric bookkeeping. For small models on a CPU that is most of a step. So the
calibration trains the built-in default task (its tiny model) for a few
steps at two shapes, in process (one device) and in worker processes (two
devices), with the registered algorithm whose step is the plainest
(:func:`calibration_algorithm`), and fits what the simulator leaves
unexplained:

* training: ``update_overhead`` per optimizer step plus ``microbatch_overhead``
  per micro-batch (shape A, 16 sequences: one step of one micro-batch; shape
  B: two steps of four);
* preparation: ``forward_overhead`` per inference micro-batch (one against
  eight per role);
* the transition on two devices (weights sharded by FSDP, gathered to
  generate): ``reshard_overhead`` per transition;

each as the non-negative least-squares fit of the measured stage time
(median of the steps after the first) minus the simulator's prediction
without them. The coefficients come from the simulator itself (the
prediction's change when one overhead is one second), so the fit counts
steps and micro-batches exactly as the prediction does. The shapes differ
from the benchmarks' on purpose (``benchmarks/planner_accuracy.py`` checks
the fit on other batch sizes and another model).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from hfsdk import HfsdkError
from hfsdk_planner.cluster import Cluster

# (sequences, mini-batch, micro-batch, forward micro-batch)
SHAPES: dict[str, tuple[int, int, int, int]] = {
    "A": (16, 16, 16, 16),
    "B": (16, 8, 2, 2),
}
OVERHEADS = ("update_overhead", "microbatch_overhead", "forward_overhead")
"""The fitted fields (each with a ``remote_`` twin for worker processes)."""


def calibration_algorithm() -> str:
    """The registered algorithm whose step is the plainest: among those that sample the
    default task's own model, the fewest extra generations and stages (they resample or
    regenerate: a step of no fixed shape), then the fewest model roles, then by name."""
    from hfsdk import get_registry

    registry = get_registry("algorithms")
    if not registry:
        raise HfsdkError(
            "hfsdk calibrate trains the default task with an algorithm, but none is "
            "installed; install one (hfsdk plugins lists what is)"
        )

    def samples_the_default_model(name: str) -> bool:
        # A program that samples nothing (SFT, DPO, reward models), starts cold, or brings
        # models of its own through its preset (distillation's teacher) would calibrate
        # another step than the one the planner prices.
        spec = registry[name].impl
        own_models = any(
            isinstance(section, dict) and "model_path" in section
            for section in spec.preset.values()
        )
        return (
            spec.has_policy
            and spec.default_model == "warm"
            and spec.default_data == "prompts"
            and not own_models
        )

    def cost(name: str) -> tuple[int, int]:
        spec = registry[name].impl
        models = sum(1 for role in spec.roles if role.kind != "scorer")
        return len(spec.extra_generations) + len(spec.extra_stages), models

    candidates = sorted(n for n in registry if samples_the_default_model(n))
    if not candidates:
        raise HfsdkError(
            "hfsdk calibrate trains the default task by sampling from its model, but no "
            f"installed algorithm does ({', '.join(sorted(registry))}); install one that "
            "samples, such as hfsdk-plugin-grpo"
        )
    return min(candidates, key=cost)


def short_run_overrides(steps: int, devices: int) -> list[str]:
    """A short measured run: ``steps`` steps on one pool of ``devices``, metrics to jsonl only."""
    return [
        f"trainer.total_steps={steps}",
        "trainer.save_every=0",
        "trainer.val_every=0",
        "trainer.loggers=[jsonl]",
        f"placement.pools.global.devices={devices}",
    ]


def run_overrides(algorithm: str, shape: str, devices: int, steps: int) -> list[str]:
    """``hfsdk run`` overrides for one calibration run of the default task."""
    from hfsdk import get_registry, load_run_config

    sequences, mini, micro, forward = SHAPES[shape]
    spec = get_registry("algorithms")[algorithm].impl
    section = load_run_config(algorithm).to_dict().get("algorithm") or {}
    samples = max(1, int(section.get("n_samples_per_prompt", 1) or 1))
    policy = spec.policy_role
    out = [
        *short_run_overrides(steps, devices),
        f"data.batch_size={max(1, sequences // samples)}",
        f"{policy}.mini_batch_size={mini}",
        f"{policy}.micro_batch_size={micro}",
    ]
    models = [role.name for role in spec.roles if role.kind != "scorer"]
    out += [f"{name}.forward_micro_batch_size={forward}" for name in models]
    return out


def train_in_subprocess(
    run_dir: Path, algorithm: str, overrides: Sequence[str], threads: int = 1
) -> Path:
    """``hfsdk run --algo algorithm`` with ``overrides`` in its own process, ``threads``
    per device (``trainer.worker_threads``; the default task unless the overrides name
    data); its run directory."""
    cmd = [
        sys.executable,
        "-c",
        "from hfsdk.core.cli.main import main; main()",
        "run",
        "--algo",
        algorithm,
        "--run-dir",
        str(run_dir),
        *overrides,
        f"trainer.worker_threads={threads}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise HfsdkError(
            f"run {run_dir.name} failed (exit {done.returncode}); its output ends:\n"
            f"{(done.stdout + done.stderr)[-3000:]}\nrun `hfsdk run --algo {algorithm}` to see why"
        )
    return run_dir


@attrs.frozen(kw_only=True)
class StageSample:
    """One run's residual (measured - predicted without overheads) and its coefficients."""

    residual: float
    coefficients: tuple[float, ...]


def _with(cluster: Cluster, **values: float) -> Cluster:
    """``cluster`` with the given overheads for both executor kinds, the others zero."""
    fields = {name: values.get(name, 0.0) for name in OVERHEADS}
    reshard = values.get("reshard_overhead", 0.0)
    return attrs.evolve(
        cluster,
        **fields,
        **{f"remote_{k}": v for k, v in fields.items()},
        reshard_overhead=reshard,
    )


def stage_samples(run_dir: Path, cluster: Cluster) -> dict[str, StageSample]:
    """The training (update, micro-batch) and preparation (forward) samples of one run."""
    from hfsdk_planner.run_plan import check_run

    def stage(cl: Cluster, name: str) -> tuple[float, float]:
        _plan, table = check_run(run_dir, cl, statistic="median")
        row = next(r for r in table if r.name == name)
        return row.predicted, row.measured

    zero = _with(cluster)
    train0, train_measured = stage(zero, "training")
    prep0, prep_measured = stage(zero, "preparation")
    per_update = stage(_with(cluster, update_overhead=1.0), "training")[0] - train0
    per_micro = stage(_with(cluster, microbatch_overhead=1.0), "training")[0] - train0
    per_forward = stage(_with(cluster, forward_overhead=1.0), "preparation")[0] - prep0
    reshard0, reshard_measured = stage(zero, "transition")
    per_reshard = stage(_with(cluster, reshard_overhead=1.0), "transition")[0] - reshard0
    return {
        "training": StageSample(
            residual=train_measured - train0, coefficients=(per_update, per_micro)
        ),
        "preparation": StageSample(residual=prep_measured - prep0, coefficients=(per_forward,)),
        "transition": StageSample(
            residual=reshard_measured - reshard0, coefficients=(per_reshard,)
        ),
    }


def fit_non_negative(samples: Sequence[StageSample]) -> tuple[float, ...]:
    """Least-squares overheads >= 0 explaining the samples' residuals (1 or 2 unknowns)."""
    width = len(samples[0].coefficients)

    def error(values: Sequence[float]) -> float:
        return math.fsum(
            (s.residual - math.fsum(c * v for c, v in zip(s.coefficients, values, strict=True)))
            ** 2
            for s in samples
        )

    def single(index: int) -> tuple[float, ...]:
        num = math.fsum(s.residual * s.coefficients[index] for s in samples)
        den = math.fsum(s.coefficients[index] ** 2 for s in samples)
        values = [0.0] * width
        values[index] = max(num / den, 0.0) if den > 0 else 0.0
        return tuple(values)

    candidates = [single(i) for i in range(width)]
    if width == 2:
        a = math.fsum(s.coefficients[0] ** 2 for s in samples)
        b = math.fsum(s.coefficients[0] * s.coefficients[1] for s in samples)
        d = math.fsum(s.coefficients[1] ** 2 for s in samples)
        r0 = math.fsum(s.residual * s.coefficients[0] for s in samples)
        r1 = math.fsum(s.residual * s.coefficients[1] for s in samples)
        det = a * d - b * b
        if abs(det) > 1e-12 * max(a * d, 1e-30):
            both = ((d * r0 - b * r1) / det, (a * r1 - b * r0) / det)
            if min(both) >= 0:
                candidates.append(both)
    elif width != 1:
        raise HfsdkError(f"fit_non_negative fits 1 or 2 overheads, got {width}")
    return min(candidates, key=error)


def measure_backend(
    cluster: Cluster,
    workdir: Path,
    *,
    remote: bool = True,
    steps: int = 4,
    log: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Fit the six backend overheads (three with ``remote`` false) on ``cluster``'s figures,
    and with ``remote`` the ``reshard_overhead`` of the two-device runs' transitions.

    Each run's devices get the threads a run of that many devices gets by default on
    this machine (a CPU profile: its cores shared among the devices; the in-process
    one-device run all of them), and the fit prices it at those threads (``hfsdk plan
    --check`` reads them from the run).
    """
    say = log or (lambda _msg: None)
    algorithm = calibration_algorithm()
    fitted: dict[str, float] = {}
    for devices, prefix in ((1, ""), (2, "remote_")) if remote else ((1, ""),):
        samples: dict[str, list[StageSample]] = {
            "training": [],
            "preparation": [],
            "transition": [],
        }
        for shape in SHAPES:
            say(f"training backend: {algorithm}, shape {shape}, {devices} device(s) ...")
            run_dir = workdir / f"backend-{shape}-{devices}"
            threads = max(1, cluster.num_devices // devices) if cluster.device_kind == "cpu" else 1
            overrides = run_overrides(algorithm, shape, devices, steps)
            train_in_subprocess(run_dir, algorithm, overrides, threads)
            for stage, sample in stage_samples(run_dir, cluster).items():
                samples[stage].append(sample)
        update, micro = fit_non_negative(samples["training"])
        (forward,) = fit_non_negative(samples["preparation"])
        fitted |= {
            f"{prefix}update_overhead": update,
            f"{prefix}microbatch_overhead": micro,
            f"{prefix}forward_overhead": forward,
        }
        if devices > 1:
            (fitted["reshard_overhead"],) = fit_non_negative(samples["transition"])
    return fitted
