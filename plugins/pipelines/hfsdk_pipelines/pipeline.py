"""Generation ahead of training: ``trainer.pipeline: one_step_off`` and ``async``.

Under ``sync`` (the default) none of this runs: each step generates from the
weights it then trains. Otherwise a :class:`GenerationPipeline` stands between
the trainer and its prompt stream. When the trainer draws step ``k``'s prompts,
the pipeline first makes sure generations are already submitted for the next
``depth`` steps (``one_step_off``: 1; ``async``: ``trainer.max_staleness``),
each submitted before step ``k``'s update, so it samples with the weights of
``k − 1`` updates. Step ``k + depth`` trains on it: its staleness (updates
between the sampling weights and the trained ones) is ``depth`` once the
pipeline is full and never more (the first steps' batches are fresher).

Submitting is non-blocking: the actor's worker group runs its calls in order,
so a generation submitted before an update uses the weights before it, while
the controller goes on. Where generation runs on devices of its own it
overlaps with training; on shared devices the calls take turns, which keeps
the staleness semantics (and the importance-sampling correction they need)
without the speed-up.

When the run needs behaviour log-probs (:func:`behaviour_log_probs_needed`: a
plugin's rollout correction or mismatch gate reads them) and the rollout reports
no ``rollout_log_probs`` of its own (:func:`rollout_reports_log_probs`: its backend's
contract), the pipeline submits the actor's
``compute_log_prob`` right behind each generation: it runs on the same weights the
generation sampled with, so those are the behaviour policy's log-probs, taken before
any later update.

With a rollout pool of its own (``placement.pools.rollout``, the session's
``rollout`` worker group of replicas) generation goes there instead, and the
pipeline keeps the replicas' weights in step: it joins the actor's rank 0 and
the replicas in a sync group once, and after every update submits the actor's
``send_weights`` and the replicas' ``receive_weights`` (a bucketed broadcast
worker to worker, see docs/async.md). Both calls queue
behind what each group is doing, so a generation submitted before the sync
uses the older weights and one submitted after it the newer. Under ``sync``
with a rollout pool the depth is 0: each step's batch is generated after the
previous update's sync (staleness 0). The replicas return ``rollout_log_probs``
themselves and each call carries a sampling seed (the run's seed and the
call's number; a batch submitted again after a replica restart keeps the seeds it
was first given), so a replica samples the same after a restart or a resume.
Metrics of the syncs finished by the time a step starts: ``sync/send_s``
(the actor's side, including its wait for the replicas), ``sync/bytes``,
``sync/rollout_wait_s`` (how long the replicas waited for the weights),
``sync/receive_s`` and ``sync/verified`` (the syncs every replica verified:
equal to ``sync/count``). Under ``trainer.mode: rollout_only`` nothing is
trained: the replicas get the starting weights once and no step syncs.
Every sync is verified on the receiving side: each
carries the weights version and a fingerprint of every tensor sent, and each
replica checks what arrived and reads back what it holds (the backends' own
checks: a replica's ``receive_weights`` reports ``sync/verified`` or
``sync/mismatch``, which is all the pipeline reads); each generated batch
reports the version its replica last verified, which must be the one the
pipeline synced before submitting it (:func:`check_version`; under partial
rollouts the replicas' count of their verified syncs must give the version the
batch's last segment was tagged with). A dropped tensor,
old weights or a skipped sync fails that step's check: the replicas are
restarted like dead ones (one warning line naming the version, the replica and
the first tensor that differs) and the
batch is generated again, or the run stops with that line when no restart is
left.

**Partial rollouts** (``trainer.partial_rollout_tokens: S`` under ``async``
with a rollout pool): a batch is generated in segments of ``S`` tokens, one
replica call each. Its first segment is submitted when its prompts are drawn;
after every update (behind that update's weight sync) the next segment of
every batch still in the queue is submitted, so a weight update interrupts the
in-flight generations at a segment boundary and they continue with the new
weights; the step that trains a batch submits whatever segments it still
lacks. Each token carries the version of the policy that sampled it
(``token_versions``) and its behaviour log-prob from those weights; the
staleness metrics are then per token (``async/staleness_max`` over every valid
token, ``async/staleness_mean`` and the histogram shares over tokens).

Checkpoints hold the pipeline (:meth:`state_dict`): the prompts drawn ahead
and the batches generated for them, with their weight versions. A resumed run
trains on exactly those batches; the data position saved beside them is the
one after the prompts drawn ahead. Regenerating them instead would need the
older weights, which the checkpoint does not keep.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from hfsdk import (
    ROLLOUT_POOL,
    HfsdkError,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
    behaviour_log_probs_needed,
    take_fault,
)

if TYPE_CHECKING:
    from hfsdk import Algorithm, AlgorithmSpec, Batch

PIPELINES = ("sync", "one_step_off", "async")
ROLLOUT_LOG_PROBS = "rollout_log_probs"
_T = TypeVar("_T")


class RolloutSyncFailed(WorkerDiedError):
    """The actor could not send its weights to the replicas (a replica's connection broke)."""

    def __init__(self, cause: str) -> None:
        super().__init__(
            f"role 'rollout': the actor's weight sync to the replicas failed: {cause}",
            role=ROLLOUT_POOL,
            rank=0,
            method="receive_weights",
            cause=cause,
        )


def check_version(held: int, expected: int, where: str) -> str | None:
    """One line when a rollout generated with weights of version ``held`` where it should have
    held ``expected`` (a skipped or lost sync), else ``None``."""
    if held == expected:
        return None
    return (
        f"{where} generated with weights version {held} where version {expected} was synced "
        "(a skipped or lost weight sync)"
    )


def pipeline_depth(pipeline: str, max_staleness: int) -> int:
    """How many steps ahead generation runs: 0 (sync), 1 (one_step_off), ``max_staleness``."""
    return {"sync": 0, "one_step_off": 1, "async": max_staleness}[pipeline]


def check_rollout_pool(config: Any, policy: str) -> None:
    """Refuse ``placement.pools.rollout`` when the policy itself would be placed on it, and
    partial rollouts without a rollout pool under ``async`` or with
    tensor-parallel or pipelined replicas (``placement.pools.rollout.tp`` or ``.pp`` > 1)."""
    placement = config.placement
    partial = config.trainer.partial_rollout_tokens
    if partial and (config.trainer.pipeline != "async" or "rollout" not in placement.pools):
        raise HfsdkError(
            f"trainer.partial_rollout_tokens={partial} needs trainer.pipeline: async and a "
            "rollout pool of its own (placement.pools.rollout); set those or set it to 0"
        )
    pool = placement.pools.get("rollout")
    tp, pp = (pool.tp, pool.pp) if pool is not None else (1, 1)
    if tp > 1 and partial:
        raise HfsdkError(
            f"trainer.partial_rollout_tokens={partial} is not supported with tensor-parallel "
            f"rollout replicas (placement.pools.rollout.tp={tp}); set one of them to 0 / 1"
        )
    if pp > 1 and partial:
        raise HfsdkError(
            f"trainer.partial_rollout_tokens={partial} is not supported with pipelined "
            f"rollout replicas (placement.pools.rollout.pp={pp}); set one of them to 0 / 1"
        )
    if "rollout" in placement.pools and placement.pool_of(policy) == "rollout":
        raise HfsdkError(
            f"placement.pools.rollout is the rollout replicas' own pool, but {policy!r} is "
            f"placed on it; set placement.roles.{policy} to another pool (roles not listed go "
            "to the first pool other than rollout)"
        )


def check_pipeline(spec: AlgorithmSpec, pipeline: str) -> None:
    """Refuse a pipeline other than ``sync`` for an algorithm that needs fresh on-policy data."""
    reason = spec.on_policy_only
    if pipeline != "sync" and not spec.has_policy:
        raise HfsdkError(
            f"trainer.pipeline={pipeline!r}: algorithm {spec.name!r} generates nothing (it "
            f"trains {', '.join(spec.roles_of_kind('score_model'))} on given data), so there is "
            "no generation to overlap; use trainer.pipeline: sync"
        )
    if pipeline != "sync" and reason:
        raise HfsdkError(
            f"trainer.pipeline={pipeline!r}: algorithm {spec.name!r} needs fresh on-policy data "
            f"({reason}); use trainer.pipeline: sync"
        )


def unused_rollout_pool(config: Any, spec: AlgorithmSpec) -> str | None:
    """One line when ``placement.pools.rollout`` is set for a run that never samples with its
    replicas (no policy, a program trained on the dataset's responses, or
    ``trainer.mode: train_only``), else ``None``: they would take its devices for nothing."""
    if ROLLOUT_POOL not in config.placement.pools:
        return None
    if not spec.has_policy:
        why = f"algorithm {spec.name!r} has no policy, so nothing generates"
    elif not spec.trains_on_generations:
        why = (
            f"algorithm {spec.name!r} trains on the dataset's responses (it generates only to "
            "validate, with the policy itself)"
        )
    elif config.trainer.mode == "train_only":
        why = "trainer.mode=train_only trains on recorded generations and generates nothing"
    else:
        return None
    return (
        f"placement.pools.rollout is set, but {why}, so its rollout replicas would hold the "
        "pool's devices unused; remove placement.pools.rollout"
    )


def unread_max_staleness(config: Any, spec: Any = None, prepared: Any = None) -> str | None:
    """The preflight warning ``unread_max_staleness``: one line when ``trainer.max_staleness``
    differs from its default under a pipeline other than ``async`` (the only one that reads
    it: it would be ignored silently), else ``None``. A warning, not a refusal: a run saved
    with such a config (benchmarks/async_vs_sync.py wrote some) must still resume."""
    trainer = config.trainer
    if trainer.pipeline == "async" or not attrs.has(type(trainer)):
        return None
    default = attrs.fields_dict(type(trainer))["max_staleness"].default
    if trainer.max_staleness == default:
        return None
    return (
        f"trainer.max_staleness={trainer.max_staleness} is read only with "
        f"trainer.pipeline=async, but trainer.pipeline={trainer.pipeline}, so it would be "
        "ignored; set trainer.pipeline=async or remove trainer.max_staleness"
    )


def pipeline_problems(config: Any) -> list[str] | None:
    """:func:`check_pipeline` of ``trainer.pipeline`` for the run's algorithm and
    :func:`unused_rollout_pool`, as messages (:func:`unread_max_staleness` is a preflight
    warning instead)."""
    from hfsdk import run_spec

    spec = run_spec(config)
    problems = []
    try:
        check_pipeline(spec, config.trainer.pipeline)
    except HfsdkError as exc:
        problems.append(str(exc))
    unused = unused_rollout_pool(config, spec)
    if unused is not None:
        problems.append(unused)
    return problems or None


def rollout_pool_check(config: Any, spec: AlgorithmSpec, prepared: Any) -> None:
    """The ``rollout_pool`` preflight check: :func:`unused_rollout_pool` (a config built
    without :func:`pipeline_problems`, e.g. evolved in code) and :func:`check_rollout_pool`
    for the policy."""
    unused = unused_rollout_pool(config, spec)
    if unused is not None:
        raise HfsdkError(unused)
    if spec.has_policy:
        check_rollout_pool(config, spec.policy_role)


def build_pipeline(
    algorithm: Algorithm,
    loader: Any,
    config: Any,
    rollout: Any,
    restart_rollout: Callable[[BaseException], Any] | None,
) -> GenerationPipeline:
    """The pipeline of ``config.trainer.pipeline`` (depth 0 under ``sync`` with ``rollout``,
    the session's rollout replica group, or ``None``)."""
    trainer = config.trainer
    needed = behaviour_log_probs_needed(config)
    return GenerationPipeline(
        algorithm,
        loader,
        depth=pipeline_depth(trainer.pipeline, trainer.max_staleness),
        behaviour_log_probs=needed and not rollout_reports_log_probs(config),
        rollout=rollout,
        seed=trainer.seed,
        partial_tokens=trainer.partial_rollout_tokens,
        response_length=config.rollout.max_response_length,
        restart_rollout=restart_rollout,
        wait_syncs=trainer.deterministic,
        frozen=trainer.mode == "rollout_only",
    )


def rollout_reports_log_probs(config: Any) -> bool:
    """Whether the run's rollout backend (``rollout.backend``, else the default one) reports
    ``rollout_log_probs`` itself, as its registered contract says (``reports_log_probs``)."""
    from hfsdk import default_rollout_backend, get_registry

    backends = get_registry("rollout_backends")
    entry = backends.get(config.rollout.backend or default_rollout_backend(backends))
    return entry is not None and bool(entry.impl.reports_log_probs)


def newest_sampling_version(out: Batch, tagged: int) -> float:
    """The newest weights version a valid token of partial rollout ``out`` was sampled with
    (its ``token_versions``); ``tagged``, its last segment's tag, when it has no valid token.

    Not the tag itself: a segment whose rows had all ended samples nothing, yet carries the
    version it was submitted with (the held-version check reads it, per replica rank, and
    every rank must agree on it), which is newer than any of the batch's tokens.
    """
    mask = out["response_mask"].bool()
    versions = out["token_versions"][mask]
    return float(versions.max()) if versions.numel() else float(tagged)


@attrs.define(kw_only=True)
class Ahead:
    """One step's prompts, drawn ahead, and what was submitted for them."""

    prompts: Batch
    version: int
    """Updates done when its generation was submitted (the weights it samples with)."""
    generated: Any
    """A worker-group future of the generated batch, or the batch once resolved."""
    behaviour: Any = None
    """A future (or batch) of the actor's log-probs on the sampling weights, or ``None``."""
    segments: int = 0
    """Partial rollouts: segments submitted so far (0: generated in one call)."""
    replica_base: int = 0
    """The weight version of the first sync of the replicas it was submitted to (its last
    segment's, under partial rollouts; they count their syncs: a count of n means version
    ``replica_base + n - 1``)."""
    seeds: list[int] = attrs.Factory(list)
    """The sampling seeds of its replica calls so far (generation or segments, in order):
    kept for a resubmission after a replica restart."""

    def resolve(self) -> None:
        """Wait for the submitted calls; keep their results."""
        if hasattr(self.generated, "result"):
            self.generated = self.generated.result()
        if self.behaviour is not None and hasattr(self.behaviour, "result"):
            self.behaviour = self.behaviour.result()


class GenerationPipeline:
    """The trainer's prompt stream with generation ``depth`` steps ahead (see module doc).

    ``next_batch()`` is the trainer's per-step draw; the algorithm's
    :meth:`~hfsdk.core.algorithm.Algorithm.generate` asks :meth:`generated`
    for the batch made ahead for those prompts (any other generation, e.g.
    greedy validation, runs as before); :meth:`step_done` counts the update.
    """

    def __init__(
        self,
        algorithm: Algorithm,
        loader: Any,
        *,
        depth: int,
        behaviour_log_probs: bool,
        rollout: Any = None,
        seed: int = 0,
        bucket_bytes: int = 32 * 1024 * 1024,
        partial_tokens: int = 0,
        response_length: int = 0,
        restart_rollout: Callable[[BaseException], Any] | None = None,
        wait_syncs: bool = False,
        frozen: bool = False,
    ) -> None:
        if depth < (0 if rollout is not None else 1):
            raise HfsdkError(f"a generation pipeline needs depth >= 1, got {depth}")
        self.algorithm = algorithm
        self.loader = loader
        self.depth = depth
        self.behaviour_log_probs = behaviour_log_probs and rollout is None
        self.rollout = rollout
        self.seed = seed
        self.bucket_bytes = bucket_bytes
        self.partial_tokens = partial_tokens if rollout is not None else 0
        self.segments = -(-response_length // partial_tokens) if self.partial_tokens else 0
        """Segments per batch under partial rollouts (0: off)."""
        self.version = 0
        self.submitted = 0
        """Generations submitted so far (numbers the replicas' sampling seeds)."""
        self._started = rollout is None
        self._syncs: list[tuple[Any, Any]] = []
        self._queue: collections.deque[Ahead] = collections.deque()
        self._current: Ahead | None = None
        self.restart_rollout = restart_rollout
        """Called with the failure when a replica died or hung: returns a fresh replica group
        (or raises, when no restart is left). ``None``: the failure ends the session."""
        self.rollout_restarts = 0
        self.wait_syncs = wait_syncs
        """Each step reports every sync submitted before it, not those finished by then
        (``trainer.deterministic``: the ``sync/*`` counts then repeat run to run)."""
        self._replica_base = 0
        """The weight version the replicas' first sync carried (they count their syncs)."""
        self.frozen = frozen
        """Nothing is trained (``trainer.mode: rollout_only``): :meth:`step_done` counts no
        update and syncs nothing; every batch samples with the starting weights."""

    # -- the trainer's side ---------------------------------------------------------

    def next_batch(self, n: int | None = None) -> Batch:
        """This step's prompts; generation for the next ``depth`` steps is submitted first."""
        if n is not None:
            return self.loader.next_batch(n)  # a draw of its own: not pipelined
        if not self._started:
            self._start()
        # Always full, also near the last step: a run extended on resume then trains on the
        # batches an uninterrupted run would have (the last ``depth`` generations are spare).
        while len(self._queue) < self.depth + 1:
            self._queue.append(self._submit(self.loader.next_batch()))
        self._current = self._queue.popleft()
        return self._current.prompts

    def step_done(self) -> None:
        """The step's update is done: later submissions sample with newer weights.

        Under ``rollout_only`` (``frozen``) no update was done: no version, no sync."""
        if self.frozen:
            return
        self.version += 1
        if self.rollout is not None and not take_fault("sync_skip", self.version):
            self._sync()
        for ahead in self._queue:  # behind the sync: the rest continues with the new weights
            self._next_segment(ahead)

    def _seed(self, ahead: Ahead, call: int) -> int:
        """The sampling seed of ``ahead``'s replica call ``call`` (0: its generation or first
        segment, ``k``: segment ``k + 1``): the one that call was first given, so a batch
        submitted again after a replica restart samples as it would have and later calls
        keep their numbers; a new call takes the next call number."""
        if call < len(ahead.seeds):
            return ahead.seeds[call]
        self.submitted += 1
        ahead.seeds.append(self.seed * 1_000_003 + self.submitted)
        return ahead.seeds[call]

    def _next_segment(self, ahead: Ahead) -> None:
        """Submit ``ahead``'s next segment (partial rollouts), if it has one left."""
        if not self.segments or ahead.segments >= self.segments:
            return
        seed = self._seed(ahead, ahead.segments)
        ahead.segments += 1
        ahead.replica_base = self._replica_base  # the replicas this segment goes to
        # Tagged with the trainer's version: the replicas hold it (their sync was queued
        # first), and a fresh replica's own sync count would restart at 0.
        ahead.generated = self.rollout.continue_partial.submit(
            ahead.generated,
            self.partial_tokens,
            ahead.segments == self.segments,
            seed,
            self.version,
        )

    def _start(self) -> None:
        """Join the actor's rank 0 and every replica in the sync group; send the weights."""
        actor, rollout = self.algorithm.actor, self.rollout
        endpoint = actor.open_weight_sync(1 + rollout.world_size)
        joins = [actor.join_weight_sync.submit(endpoint), rollout.join_weight_sync.submit(endpoint)]
        for join in joins:  # both sides block until every rank joined: submit, then wait
            join.result()
        self._started = True
        self._replica_base = self.version  # fresh replicas: at start, on resume, on a restart
        self._sync()

    def _sync(self) -> None:
        """Submit one weight broadcast (actor → replicas); its metrics are read when done."""
        drop = "drop" if take_fault("sync_drop", self.version) else None
        stale = "stale" if take_fault("sync_stale", self.version) else None
        if stale is None and take_fault("slice_drop", self.version):
            stale = "slice_drop"  # a tensor-parallel replica rank loses one slice
        send = self.algorithm.actor.send_weights.submit(self.bucket_bytes, self.version, drop)
        self._syncs.append((send, self.rollout.receive_weights.submit(stale)))

    def sync_metrics(self, *, wait: bool = False) -> dict[str, float]:
        """``sync/*`` of the weight syncs finished by now (all of them with ``wait``), summed."""
        totals: dict[str, float] = {}
        pending = []
        for send, receive in self._syncs:
            sent = send.result()[0] if wait or send.done() else None
            # A failed send is reported at once: its replicas may never finish receiving.
            if sent is not None and "sync/failed" in sent:
                raise RolloutSyncFailed(sent["sync/failed"])
            if sent is None or not (wait or receive.done()):
                pending.append((send, receive))
                continue
            received = receive.result()
            for got in received:
                if "sync/mismatch" in got:
                    raise RolloutSyncFailed(got["sync/mismatch"])
            parts = {
                "sync/send_s": sent["sync/time_s"],
                "sync/bytes": sent["sync/bytes"],
                "sync/rollout_wait_s": max(r["sync/wait_s"] for r in received),
                "sync/receive_s": max(r["sync/time_s"] for r in received),
                "sync/count": 1.0,
                "sync/verified": float(all(r.get("sync/verified") for r in received)),
            }
            merges = [r.get("sync/merges_verified", 0.0) for r in received]
            if any(merges):  # derived weights (a LoRA merge) checked against their probes
                parts["sync/merges_verified"] = min(merges)
            for key, value in parts.items():
                totals[key] = totals.get(key, 0.0) + float(value)
        self._syncs = pending
        return totals

    def _recovering(self, call: Callable[[], _T], head: Ahead | None = None) -> _T:
        """``call()``; if a replica died, hung or lost its sync connection, restart the rollout
        pool alone (``restart_rollout``), sync it and submit again what was ahead, then retry.

        Every batch generated ahead (``head``, the one being trained, too) is generated
        again on the fresh replicas with the current weights: the replicas that made
        them are gone with whatever they held, and a batch sampled around a failed sync
        cannot be trusted to carry the weights its version says.
        """
        while True:
            try:
                return call()
            except (WorkerDiedError, WorkerTimeoutError) as exc:
                if self.restart_rollout is None or exc.role != self.rollout.role:
                    raise
                self.rollout = self.restart_rollout(exc)
                self.rollout_restarts += 1
                self._syncs = []  # those died with the old replicas
                self._start()
                for ahead in [*([head] if head is not None else []), *self._queue]:
                    # With the seeds it was first given: the run samples on as it would have.
                    fresh = self._submit(ahead.prompts, ahead.seeds)
                    ahead.version, ahead.generated = fresh.version, fresh.generated
                    ahead.behaviour, ahead.segments = fresh.behaviour, fresh.segments
                    ahead.replica_base, ahead.seeds = fresh.replica_base, fresh.seeds

    def _submit(self, prompts: Batch, seeds: list[int] | None = None) -> Ahead:
        """Submit the generation for ``prompts``; ``seeds``: the sampling seeds its replica
        calls were given when it was first submitted (a resubmission), else new ones."""
        algorithm = self.algorithm
        batch = algorithm.generation_input(prompts)
        ahead = Ahead(
            prompts=prompts,
            version=self.version,
            generated=None,
            replica_base=self._replica_base,
            seeds=list(seeds or ()),
        )
        if self.segments:
            ahead.generated = self.rollout.start_partial.submit(
                batch,
                self.partial_tokens,
                self.segments == 1,
                self._seed(ahead, 0),
                self.version,
            )
            ahead.segments = 1
            return ahead
        if self.rollout is not None:
            batch.meta["sampling_seed"] = self._seed(ahead, 0)
            ahead.generated = self.rollout.generate_sequences.submit(batch)
            return ahead
        generated = algorithm.actor.generate_sequences.submit(batch)
        behaviour = None
        if self.behaviour_log_probs:
            # Queued behind the generation, before any later update: the sampling weights.
            behaviour = algorithm.actor.compute_log_prob.submit(generated)
        return Ahead(
            prompts=prompts, version=self.version, generated=generated, behaviour=behaviour
        )

    # -- the algorithm's side -------------------------------------------------------

    def generated(self, prompts: Batch) -> tuple[Batch, dict[str, float]] | None:
        """The batch generated ahead for ``prompts`` and its staleness metrics, else ``None``."""
        head = self._current
        if head is None or prompts is not head.prompts:
            return None
        self._current = None

        def lacking_then_resolve() -> dict[str, float]:
            while self.segments and head.segments < self.segments:
                self._next_segment(head)  # what it still lacks, with the current weights
            try:
                head.resolve()
            except (WorkerDiedError, WorkerTimeoutError):
                raise
            except (WorkerError, HfsdkError):
                # A generation queued behind a sync that failed its check fails for it (a vLLM
                # replica refuses to generate): report the sync, which restarts the replicas.
                if self.rollout is not None:
                    self.sync_metrics(wait=True)
                raise
            if self.rollout is None:
                return {}
            synced = self.sync_metrics(wait=self.wait_syncs)
            stale = self._held_version_problem(head)
            if stale is not None:
                raise RolloutSyncFailed(stale)
            return synced

        synced = self._recovering(lacking_then_resolve, head)
        out: Batch = head.generated
        if head.behaviour is not None and ROLLOUT_LOG_PROBS not in out:
            out[ROLLOUT_LOG_PROBS] = head.behaviour["old_log_probs"]
        if "token_versions" in out:
            metrics = self.token_staleness_metrics(out)
        else:
            metrics = self.staleness_metrics(self.version - head.version)
        if self.rollout is not None:
            # The replicas count their syncs, the first one (of version replica_base) included.
            synced_count = float(out.meta.pop("weights_version"))
            out.meta.pop("synced_version", None)
            policy_version = out.meta.pop("policy_version", None)
            if policy_version is not None:  # partial rollouts
                metrics["async/rollout_weights_version"] = newest_sampling_version(
                    out, policy_version
                )
            else:
                metrics["async/rollout_weights_version"] = synced_count - 1 + head.replica_base
            metrics.update(synced)
            metrics["async/rollout_restarts"] = float(self.rollout_restarts)
        return out, metrics

    @staticmethod
    def _held_version_problem(head: Ahead) -> str | None:
        """:func:`check_version` of ``head``'s resolved batch: the weights version its replicas
        held against the one they were due to hold.

        A whole batch reports the version its replica last verified (``synced_version``),
        due: the one synced before it was submitted. Under partial rollouts each segment's
        tokens are tagged with the version the pipeline passed (``policy_version``: the last
        segment's); the replicas' count of their verified syncs (``weights_version``, from
        ``replica_base``) says which they held for that last segment. A sync skipped or lost
        before any of its segments leaves that count behind for good (a restart resubmits
        every segment), so the last segment's check catches a tag the replicas never held.
        """
        meta = head.generated.meta
        if not head.segments:
            held = meta.get("synced_version")
            if held is None:
                return None
            return check_version(int(held), head.version, "the rollout replicas")
        tagged, count = meta.get("policy_version"), meta.get("weights_version")
        if tagged is None or count is None:
            return None
        held = int(count) - 1 + head.replica_base
        return check_version(held, int(tagged), "the rollout replicas")

    def staleness_metrics(self, staleness: int) -> dict[str, float]:
        """``async/staleness_max``/``_mean`` and the histogram share of each value 0..depth.

        Every sample of a batch comes from one weight version (no partial
        rollouts), so the histogram is one-hot per step; the run's histogram is
        the mean of these shares over steps.
        """
        metrics = {
            "async/staleness_max": float(staleness),
            "async/staleness_mean": float(staleness),
            "async/weights_version": float(self.version),
        }
        for value in range(self.depth + 1):
            metrics[f"async/staleness_hist_{value}"] = float(staleness == value)
        return metrics

    def token_staleness_metrics(self, out: Batch) -> dict[str, float]:
        """Per-token staleness of a partial rollout (``token_versions``) over its valid tokens."""
        import torch

        mask = out["response_mask"].bool()
        staleness = (self.version - out["token_versions"])[mask]
        if not staleness.numel():
            return self.staleness_metrics(0)
        metrics = {
            "async/staleness_max": float(staleness.max()),
            "async/staleness_mean": float(staleness.float().mean()),
            "async/weights_version": float(self.version),
            "async/versions_per_response_max": float(
                max(
                    len(torch.unique(row[m]))
                    for row, m in zip(out["token_versions"], mask, strict=True)
                )
            ),
        }
        for value in range(self.depth + 1):
            metrics[f"async/staleness_hist_{value}"] = float((staleness == value).float().mean())
        return metrics

    # -- checkpoints ----------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The weight version, the replica restarts so far and every batch generated ahead
        (waits for them)."""

        def resolve_all() -> None:
            for ahead in self._queue:
                ahead.resolve()

        self._recovering(resolve_all)
        return {
            "version": self.version,
            "submitted": self.submitted,
            "rollout_restarts": self.rollout_restarts,
            "depth": self.depth,
            "ahead": [
                {
                    "prompts": a.prompts,
                    "version": a.version,
                    "generated": a.generated,
                    "behaviour": a.behaviour,
                    "segments": a.segments,
                    "replica_base": a.replica_base,
                    "seeds": list(a.seeds),
                }
                for a in self._queue
            ],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (the loader's position is restored beside it)."""
        if int(state["depth"]) != self.depth:
            raise HfsdkError(
                f"the checkpoint's pipeline runs {state['depth']} step(s) ahead, this run "
                f"{self.depth}; resume with the same trainer.pipeline and trainer.max_staleness"
            )
        self.version = int(state["version"])
        self.submitted = int(state.get("submitted", 0))
        # Absent from checkpoints written before it was kept: those resume counting from 0.
        self.rollout_restarts = int(state.get("rollout_restarts", 0))
        self._queue = collections.deque(Ahead(**entry) for entry in state["ahead"])
        self._current = None
