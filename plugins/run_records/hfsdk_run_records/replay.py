"""``hfsdk replay RUN_DIR --step N``: run step N's update again and compare it with the log.

A run made with ``trainer.rollout_dump: true`` keeps, for every step, the batch its
update saw (``rollouts/step_N.pt``, :mod:`hfsdk_run_records.step_dump`), and its
checkpoints keep the state between steps. Replay starts the run's workers from its
config, loads the newest checkpoint before step N (none: the run's starting weights),
re-runs the update of every step after it up to N on the dumped batches
(:meth:`Algorithm.replay_update`, then :meth:`Algorithm.finish`'s batch metrics, as a
step does) and compares each metric — losses, gradient norm, clip fractions, KL — with
the one the run logged. Equal to the last bit means the step is reproduced: a bug can
be studied on that one batch, with a debugger, without the rest of the run.

An update whose policy has dropout (:func:`dropout_settings`) draws random numbers from
its workers' generators, whose state at that update the dump does not keep (the workers
expose theirs only inside checkpoints): replay seeds them from ``trainer.seed`` instead,
so such a step cannot be reproduced bit for bit. Replay says so before it starts (one
warning line) and marks each result (:attr:`ReplayedStep.random_draws`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import numbers
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

import hfsdk
from hfsdk import HfsdkError, verify_checkpoint

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class ReplayedStep:
    """One replayed update: each metric it returned, as logged by the run and as replayed."""

    step: int
    logged: dict[str, float]
    replayed: dict[str, float]
    random_draws: str | None = None
    """Why its update draws random numbers replay cannot draw again (the policy's dropout
    settings), so differing metrics are expected; ``None``: it should reproduce exactly."""

    @property
    def compared(self) -> list[str]:
        """The metrics both the run's log and the replay hold."""
        return sorted(set(self.logged) & set(self.replayed))

    @property
    def differing(self) -> list[str]:
        """Compared metrics whose replayed value is not bit-for-bit the logged one."""
        return [k for k in self.compared if not _same(self.logged[k], self.replayed[k])]


_TIMED = ("timing/", "perf/")
"""Wall-clock metrics, and the token count the trainer turns into a throughput."""


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _dropout_rates(values: Mapping[str, Any], where: str) -> list[str]:
    """``key=rate in where`` for every dropout rate above 0 in an HF model config's values
    (``*dropout*`` or ``*pdrop`` keys, nested configs such as ``text_config`` too)."""
    found = []
    for key, value in values.items():
        if isinstance(value, dict):
            found += _dropout_rates(value, where)
            continue
        rate = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if rate and ("dropout" in key or key.endswith("pdrop")) and value > 0:
            found.append(f"{key}={value} in {where}")
    return found


def dropout_settings(config: Any, model_path: str | None) -> list[str]:
    """The settings that make the policy's update draw random numbers (dropout): its
    ``lora.dropout`` with adapters on, and the dropout rates of its model's ``config.json``
    at ``model_path`` (a backend that builds its model without them reproduces anyway: the
    warning then errs on the side of caution). Empty: nothing in the update is random."""
    from hfsdk import run_spec

    role = run_spec(config).policy_role
    section = getattr(config, role)
    found = []
    lora = getattr(section, "lora", None)
    if lora is not None and getattr(lora, "rank", 0) > 0 and getattr(lora, "dropout", 0) > 0:
        found.append(f"{role}.lora.dropout={lora.dropout}")
    path = Path(model_path) / "config.json" if model_path else None
    if path is not None and path.is_file():
        with contextlib.suppress(OSError, ValueError):  # unreadable: the backend will say so
            values = json.loads(path.read_text())
            if isinstance(values, dict):
                found += _dropout_rates(values, str(path))
    return found


def _run_config(run_dir: Path) -> Any:
    from hfsdk import CONFIG_FILE, load_run_config

    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise HfsdkError(
            f"{str(run_dir)!r} is not a run directory (no {CONFIG_FILE}); pass the RUN_DIR "
            "of an hfsdk run"
        )
    return load_run_config(None, str(path))


def _trained_length(run_dir: Path, start: int, step: int, saved: int, what: str) -> int:
    """The ``trainer.total_steps`` steps ``start+1..step`` trained under (a cosine schedule's
    length): a resume may change it, and config.yaml holds the last one (``saved``).

    Each run segment's first step and length are in ``rollouts/segments.json``; steps
    trained under two lengths in one replay are refused. A run from before that file:
    ``saved``, as before.
    """
    from hfsdk_run_records.rollout_dump import read_segments

    segments = sorted(read_segments(run_dir))

    def length(s: int) -> int:
        return next((total for first, total in reversed(segments) if first <= s), saved)

    lengths = {s: length(s) for s in range(start + 1, step + 1)}
    if len(set(lengths.values())) > 1:
        resume = next(s for s in lengths if lengths[s] != lengths[start + 1])
        raise HfsdkError(
            f"{what}: trainer.total_steps changed from {lengths[start + 1]} to {lengths[resume]} "
            f"on resume at step {resume - 1}, inside the steps to replay from checkpoint "
            f"{f'step_{start}' if start else 'the start'}, so their learning-rate schedules "
            f"differ; replay a step up to {resume - 1}, or one with a checkpoint of step "
            f"{resume - 1} or later before it"
        )
    return lengths[step]


def _schedule_follows_run_length(config: Any, spec: Any) -> bool:
    """Whether a trained role's learning-rate schedule takes its length from
    ``trainer.total_steps``: a non-constant schedule with no ``optim.total_steps`` of its own
    (a constant one, with or without warm-up, is the same at any run length)."""
    from hfsdk import TRAINED_KINDS

    for role in spec.roles:
        optim = getattr(config.sections.get(role.name), "optim", None)
        if role.kind not in TRAINED_KINDS or optim is None:
            continue
        schedule = getattr(optim, "lr_schedule", "constant")
        if schedule != "constant" and not getattr(optim, "total_steps", 0):
            return True
    return False


class _NoScoring:
    """A signal section's scorer in replay, which re-runs recorded updates on their dumped
    rewards and scores nothing (stands in when no plugin builds scorers)."""

    def __init__(self, section: str) -> None:
        self.section = section

    def score(
        self, prompts: Sequence[str], responses: Sequence[str], columns: Mapping[str, Sequence[Any]]
    ) -> tuple[list[float], dict[str, float]]:
        """Refuse: replay's updates use the rewards their step dumps recorded."""
        raise HfsdkError(
            f"hfsdk replay was asked to score {self.section}.functions, but it replays recorded "
            "updates on their dumped rewards; score a run with hfsdk run (rewards plugin enabled)"
        )


class _ScorerFallback:
    """Answers ``hfsdk_build_reward_scorer`` last: the rewards plugin's scorer when it is
    enabled (as a run builds it), else :class:`_NoScoring` instead of refusing the replay."""

    @hfsdk.hookimpl(trylast=True)
    def hfsdk_build_reward_scorer(self, section: str, config: Any) -> Any:
        """A scorer that refuses to score (replay never calls it)."""
        return _NoScoring(section)


@contextlib.contextmanager
def _scoring_not_needed() -> Iterator[None]:
    """Let replay build its signals' scorers without the rewards plugin (disabled or not
    installed): a run's preparation refuses reward functions nothing can score."""
    from hfsdk import get_plugin_manager

    pm = get_plugin_manager().pm
    fallback = _ScorerFallback()
    pm.register(fallback, name="hfsdk-replay-scorer-fallback")
    try:
        yield
    finally:
        pm.unregister(fallback)


def _update_only(config: Any, spec: Any) -> Any:
    """What a replay session needs of ``prepare_run``: the run's model, tokenizer and
    signals (as a run scores them: an algorithm may look its signals up), no prompt stream.

    Replay updates on the run's own dumps. ``prepare_run`` would load and tokenize
    ``data.train_files`` and run the preflight checks, among them ``train_only``'s reading
    of ``trainer.rollouts_from``: a dataset moved, or a source run deleted, since the run
    would block a replay that needs neither (as :func:`~hfsdk_run_records.export.weights_only`
    spares an export).
    """
    from hfsdk import get_plugin_manager, run_signals
    from hfsdk_run_records.export import weights_only

    prepared = weights_only(config, spec)
    signals = run_signals(config, spec, prepared.assets)
    build = get_plugin_manager().hook.hfsdk_build_reward_scorer
    with _scoring_not_needed():  # its stand-in answers last: never None
        scorers = {r: build(section=r, config=s) for r, s in signals.items() if s.functions}
    return attrs.evolve(prepared, signal_configs=signals, reward_scorers=scorers)


def logged_metrics(run_dir: str | Path) -> dict[int, dict[str, Any]]:
    """Each logged step's line of ``metrics.jsonl`` (``read_metrics``), by step, its metric
    values as floats.

    A value that is not a number (an edited or damaged log) is skipped with a warning naming
    the file, line and key, as ``read_metrics`` skips a damaged line: that metric is then not
    compared, instead of one bad value stopping the whole replay.
    """
    from hfsdk import METRICS_FILE, read_metrics

    path = Path(run_dir) / METRICS_FILE

    @functools.cache
    def lines() -> dict[int, int]:
        """Each step's line number (the last copy, as below): read_metrics keeps none, so the
        file is read again, and only when a warning needs them."""
        found: dict[int, int] = {}
        text = path.read_text(errors="replace") if path.is_file() else ""
        for number, line in enumerate(text.splitlines(), 1):
            with contextlib.suppress(ValueError):  # damaged: read_metrics warns of it
                row = json.loads(line)
                if isinstance(row, dict) and isinstance(row.get("step"), int):
                    found[row["step"]] = number
        return found

    logged: dict[int, dict[str, Any]] = {}
    for row in read_metrics(run_dir):
        step = int(row["step"])
        values: dict[str, Any] = {"step": step}
        for key, value in row.items():
            if key == "step":
                continue
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                logger.warning(
                    "%s line %s: %s is %r, not a number; skipped (that metric is not compared)",
                    path,
                    lines().get(step, "?"),
                    key,
                    value,
                )
        logged[step] = values
    return logged


def _steps_text(steps: Sequence[int]) -> str:
    """Sorted step numbers compactly: runs of three or more as ``a..b`` (``1..3, 5, 7, 8``);
    a long list keeps its first and last parts."""
    parts: list[str] = []
    run: list[int] = []
    for s in [*sorted(steps), None]:
        if run and (s is None or s != run[-1] + 1):
            parts += [f"{run[0]}..{run[-1]}"] if len(run) > 2 else [str(r) for r in run]
            run = []
        if s is not None:
            run.append(s)
    return ", ".join(parts if len(parts) <= 8 else [*parts[:5], "...", *parts[-2:]])


def _checkpoint_state(checkpoint: Path, start: int, what: str) -> dict[str, Any]:
    """The trainer state of the checkpoint replay starts from, checked before any worker
    starts (as a resume checks it): an older ``COMPLETE`` marker holds the step alone, so
    :func:`verify_checkpoint` lists no file, and a missing or damaged state file crashed
    the replay after the workers had loaded."""
    from hfsdk import TRAINER_STATE, load_checkpoint_file

    path = checkpoint / TRAINER_STATE
    problem = verify_checkpoint(checkpoint)
    state: Any = None
    if problem is None:
        try:
            state = load_checkpoint_file(path)
        except FileNotFoundError:
            problem = f"{path} is missing"
        except Exception as exc:  # any damage: its message's first line, else its type
            why = "".join(str(exc).strip().splitlines()[:1]) or type(exc).__name__
            problem = f"{path} cannot be read ({why.split('. ')[0]})"  # torch's: 5 sentences
    if problem is None and not (isinstance(state, dict) and {"step", "algorithm"} <= set(state)):
        problem = f"{path} is not a trainer state (a dict with 'step' and 'algorithm')"
    if problem is not None:  # else its damage would replay as "the step did not reproduce"
        raise HfsdkError(
            f"{what}: checkpoint step_{start} is damaged: {problem}; the step cannot be "
            f"replayed from it: restore the file, or move {str(checkpoint)!r} out of the run "
            "directory to replay from an older checkpoint (or the run's start)"
        )
    return state


def replay_steps(run_dir: str | Path, step: int) -> list[ReplayedStep]:
    """Replay every update from the newest checkpoint before ``step`` through ``step``."""
    import numpy as np
    import torch

    from hfsdk import (
        AlgorithmContext,
        TrainingSession,
        complete_checkpoints,
        run_assets,
        run_spec,
    )
    from hfsdk_run_records.export import without_rollout_pool
    from hfsdk_run_records.step_dump import read_step_dump

    run_dir = Path(run_dir)
    # An update runs on the trained roles alone: the rollout replicas would idle on their pool.
    config = without_rollout_pool(_run_config(run_dir))
    logged = logged_metrics(run_dir)
    trained = sorted(s for s in logged if s >= 1)  # step 0: the validation before training
    if not trained:
        why = (
            "holds only step 0, the validation before training" if logged else "is missing or empty"
        )
        raise HfsdkError(
            f"--step {step}: the run in {str(run_dir)!r} logged no steps (metrics.jsonl "
            f"{why}), so there is nothing to compare a replay with; replay a run that "
            "trained at least one step"
        )
    if step not in trained:
        raise HfsdkError(
            f"--step {step}: the run in {str(run_dir)!r} logged steps {_steps_text(trained)}; "
            "pass one of them"
        )
    if config.trainer.mode == "rollout_only":
        raise HfsdkError(
            f"the run in {str(run_dir)!r} ran trainer.mode: rollout_only and trained nothing; "
            "there is no update to replay"
        )
    spec = run_spec(config)
    if not spec.has_policy:
        raise HfsdkError(
            f"the {config.algo} run in {str(run_dir)!r} trains no policy; hfsdk replay replays "
            "policy updates (a score model's are not dumped)"
        )
    what = f"hfsdk replay --step {step}"
    before = [(s, p) for s, p in complete_checkpoints(run_dir) if s < step]
    start, checkpoint = max(before, key=lambda sp: sp[0]) if before else (0, None)
    state = _checkpoint_state(checkpoint, start, what) if checkpoint is not None else None
    dumps = [read_step_dump(run_dir, s, for_what=what) for s in range(start + 1, step + 1)]
    length = config.trainer.total_steps
    if _schedule_follows_run_length(config, spec):  # else a changed length changes nothing
        length = _trained_length(run_dir, start, step, length, what)
    if length != config.trainer.total_steps:  # the schedule those steps trained under
        trainer = attrs.evolve(config.trainer, total_steps=length)
        config = attrs.evolve(config, sections={**config.sections, "trainer": trainer})
    from hfsdk_run_records.run_info import warn_of_changes

    warn_of_changes(run_dir, config)  # what changed since the run: why a step may differ
    dropout = dropout_settings(config, run_assets(config, spec).model_path)
    random_draws = f"dropout draws random numbers ({', '.join(dropout)})" if dropout else None
    if random_draws is not None:
        logger.warning(
            "%s: the policy's update uses dropout (%s), whose random draws replay cannot repeat "
            "(the run's RNG state at that update is not dumped), so this step cannot be "
            "reproduced bit for bit; its metrics differing is expected — set the dropout to 0 "
            "in a run meant for replay",
            what,
            ", ".join(dropout),
        )
    if config.trainer.deterministic:
        from hfsdk import enable_determinism

        enable_determinism()
    random.seed(config.trainer.seed)  # as the trainer seeds a session it starts
    np.random.seed(config.trainer.seed)
    torch.manual_seed(config.trainer.seed)
    try:
        prepared = _update_only(config, spec)
        results = []
        with TrainingSession(config, spec, prepared=prepared) as session:
            context = AlgorithmContext(
                config=config, roles=session.roles, signals=session.signals, spec=spec
            )
            algorithm = spec.program(context)
            if checkpoint is not None and state is not None:
                session.load_workers(checkpoint)
                algorithm.load_state_dict(state["algorithm"])
            for dump in dumps:
                if dump.update is None:
                    raise HfsdkError(
                        f"{what}: step {dump.step}'s dump holds no update batch (written "
                        "under trainer.mode: rollout_only)"
                    )
                # As a step does: the updates' metrics, then finish()'s batch metrics over
                # them (finish's actor/kl, from the batch, is the one the log holds).
                algorithm.metrics = {}
                algorithm.record(algorithm.replay_update(dump.update))
                replayed = {
                    k: v
                    for k, v in algorithm.finish(dump.update).items()
                    if not k.startswith(_TIMED)
                }
                row = logged.get(dump.step, {})
                results.append(
                    ReplayedStep(
                        step=dump.step,
                        logged={k: row[k] for k in replayed if k in row},
                        replayed=replayed,
                        random_draws=random_draws,
                    )
                )
        return results
    finally:
        if config.trainer.deterministic:
            from hfsdk import disable_determinism

            disable_determinism()
