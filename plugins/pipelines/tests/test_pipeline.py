"""trainer.pipeline: generation ahead of training, staleness bounds, resume, refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hfsdk_pipelines.pipeline import GenerationPipeline, check_version, pipeline_depth

from hfsdk.core.batch import Batch
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.trainer import Trainer
from hfsdk.core.workers.errors import WorkerDiedError

SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "trainer.executor=local",
    "trainer.loggers=[jsonl]",
]
COMPARED = ("reward/mean", "response_length/mean", "actor/pg_loss", "actor/kl", "actor/grad_norm")


class _Future:
    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


class _Method:
    """A worker method whose result records the weight version it ran with."""

    def __init__(self, actor: _FakeActor, key: str) -> None:
        self.actor, self.key = actor, key

    def submit(self, batch: Any) -> _Future:
        rows = len(batch.value if isinstance(batch, _Future) else batch)
        column = torch.full((rows, 1), float(self.actor.version))
        return _Future(Batch.from_dict(tensors={self.key: column}))


class _FakeActor:
    def __init__(self) -> None:
        self.version = 0
        self.generate_sequences = _Method(self, "sampled_with")
        self.compute_log_prob = _Method(self, "old_log_probs")


class _FakeAlgorithm:
    def __init__(self) -> None:
        self.actor = _FakeActor()

    def generation_input(self, prompts: Batch) -> Batch:
        return prompts


class _Loader:
    def __init__(self) -> None:
        self.drawn = 0

    def next_batch(self, n: int | None = None) -> Batch:
        self.drawn += 1
        return Batch.from_dict(tensors={"prompt_no": torch.full((2, 1), float(self.drawn))})


@pytest.mark.parametrize(("pipeline", "bound"), [("one_step_off", 1), ("async", 3)])
def test_staleness_never_exceeds_the_bound(pipeline: str, bound: int) -> None:
    algorithm = _FakeAlgorithm()
    depth = pipeline_depth(pipeline, max_staleness=3)
    assert depth == bound
    pipe = GenerationPipeline(algorithm, _Loader(), depth=depth, behaviour_log_probs=True)
    seen = []
    for step in range(1, 11):
        prompts = pipe.next_batch()
        assert float(prompts["prompt_no"][0, 0]) == step  # prompts in stream order
        out, metrics = pipe.generated(prompts)
        trained_with = step - 1  # updates done before this step's update
        sampled_with = int(out["sampled_with"][0, 0])
        # the behaviour log-probs ran on the sampling weights, not on later ones
        assert torch.equal(out["rollout_log_probs"], out["sampled_with"])
        assert metrics["async/staleness_max"] == trained_with - sampled_with
        assert metrics[f"async/staleness_hist_{trained_with - sampled_with}"] == 1.0
        seen.append(trained_with - sampled_with)
        algorithm.actor.version += 1  # the step's update
        pipe.step_done()
    assert max(seen) == bound  # reached once the pipeline is full ...
    assert seen[:bound] == list(range(bound))  # ... the first batches are fresher
    assert all(s == bound for s in seen[bound:])


def test_other_generations_are_not_pipelined() -> None:
    pipe = GenerationPipeline(_FakeAlgorithm(), _Loader(), depth=1, behaviour_log_probs=False)
    pipe.next_batch()
    assert pipe.generated(_Loader().next_batch()) is None  # not the step's prompts


class _Failing:
    """The future of a call on a replica that died."""

    def __init__(self, method: str) -> None:
        self.method = method

    def done(self) -> bool:
        return True

    def result(self) -> Any:
        raise WorkerDiedError(
            f"role 'rollout' rank 0 died during method {self.method!r}: killed",
            role="rollout",
            rank=0,
            method=self.method,
            cause="killed",
        )


class _Done(_Future):
    def done(self) -> bool:
        return True


class _Call:
    def __init__(self, run: Any) -> None:
        self.submit = run


class _FakeReplicas:
    """A rollout group whose calls run at submit time, in order, as a worker group's would.

    ``weights``: the actor version of the last sync it received (``None``: none yet);
    once ``dead`` every call fails, as a killed replica's would. ``mismatch``: what its
    own check of the next sync finds (reported as ``sync/mismatch``, the weights kept);
    ``lose_syncs``: syncs report verified but change nothing; ``report_version``: each
    batch carries the version it was generated with (``synced_version``).
    """

    role = "rollout"
    world_size = 1

    def __init__(self, actor: _FakeActor) -> None:
        self.actor = actor
        self.weights: int | None = None
        self.syncs = 0
        self.dead = False
        self.mismatch: str | None = None
        self.lose_syncs = False
        self.report_version = False
        self.join_weight_sync = _Call(lambda endpoint: self._call("join", lambda: 0))
        self.receive_weights = _Call(
            lambda fault=None: self._call("receive_weights", self._receive)
        )
        self.generate_sequences = _Call(
            lambda batch: self._call("generate", lambda: self._gen(batch))
        )

    def _call(self, method: str, run: Any) -> Any:
        return _Failing(method) if self.dead else _Done(run())

    def _receive(self) -> list[dict]:
        if self.mismatch is not None:
            return [{"sync/wait_s": 0.0, "sync/time_s": 0.0, "sync/mismatch": self.mismatch}]
        if not self.lose_syncs or self.weights is None:
            self.weights = self.actor.version
        self.syncs += 1
        return [{"sync/wait_s": 0.0, "sync/time_s": 0.0, "sync/verified": 1.0}]

    def _gen(self, batch: Batch) -> Batch:
        assert self.weights is not None, "generated before its first weight sync"
        out = Batch.from_dict(
            tensors={"sampled_with": torch.full((len(batch), 1), 1.0 * self.weights)}
        )
        out.meta["weights_version"] = self.syncs  # a replica counts its syncs, as a real one
        if self.report_version:
            out.meta["synced_version"] = self.weights
        return out


class _SyncingActor(_FakeActor):
    """The actor's side of the sync: a send fails once the replicas it feeds died."""

    def __init__(self) -> None:
        super().__init__()
        self.replicas: _FakeReplicas | None = None
        self.open_weight_sync = lambda world_size: "endpoint"
        self.join_weight_sync = _Call(lambda endpoint: _Done(0))
        self.send_weights = _Call(self._send)

    def _send(self, bucket_bytes: int, version: int = 0, fault: str | None = None) -> _Done:
        if self.replicas is not None and self.replicas.dead:
            return _Done([{"sync/failed": "Connection closed by peer"}])
        return _Done([{"sync/time_s": 0.0, "sync/bytes": 8.0}])


def _replica_pipeline(restart: Any) -> tuple[GenerationPipeline, _FakeAlgorithm]:
    algorithm = _FakeAlgorithm()
    algorithm.actor = _SyncingActor()
    algorithm.actor.replicas = _FakeReplicas(algorithm.actor)
    pipe = GenerationPipeline(
        algorithm,
        _Loader(),
        depth=1,
        behaviour_log_probs=False,
        rollout=algorithm.actor.replicas,
        restart_rollout=restart,
    )
    return pipe, algorithm


def test_a_dead_replica_is_restarted_alone_and_regenerates_with_the_current_weights() -> None:
    failures: list[BaseException] = []

    def restart(exc: BaseException) -> _FakeReplicas:
        failures.append(exc)
        algorithm.actor.replicas = _FakeReplicas(algorithm.actor)
        return algorithm.actor.replicas

    pipe, algorithm = _replica_pipeline(restart)
    staleness, restarts = [], []
    for step in range(1, 7):
        if step == 3:
            # killed once step 3's batch was made (the fake generates at submit time): the
            # step trains on it, and its update's send to the dead replica fails
            algorithm.actor.replicas.dead = True
        prompts = pipe.next_batch()
        out, metrics = pipe.generated(prompts)
        trained_with = step - 1
        sampled_with = int(out["sampled_with"][0, 0])
        assert metrics["async/staleness_max"] == trained_with - sampled_with
        assert metrics["async/rollout_weights_version"] == sampled_with
        staleness.append(trained_with - sampled_with)
        restarts.append(metrics["async/rollout_restarts"])
        algorithm.actor.version += 1
        pipe.step_done()
    assert len(failures) == 1 and isinstance(failures[0], WorkerDiedError)
    # step 4's batch, submitted to the dead replica, was sampled again on the fresh one
    # with the weights being trained; the pipeline then fills up again (staleness 1)
    assert staleness == [0, 1, 1, 0, 1, 1]
    assert restarts == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("mismatch", "1 tensor(s) sent but never loaded (first: 'w')"),
        ("lose_syncs", "generated with weights version 1 where version 2 was synced"),
    ],
)
def test_what_the_replicas_report_of_a_sync_restarts_them(fault: str, says: str) -> None:
    """The pipeline's side of a verified sync, with no backend: it acts on what the replicas
    report (``sync/mismatch`` from their own check; the version a batch was generated with),
    restarts them and trains on a batch sampled with the current weights."""
    failures: list[BaseException] = []

    def restart(exc: BaseException) -> _FakeReplicas:
        failures.append(exc)
        algorithm.actor.replicas = _FakeReplicas(algorithm.actor)
        algorithm.actor.replicas.report_version = True
        return algorithm.actor.replicas

    pipe, algorithm = _replica_pipeline(restart)
    algorithm.actor.replicas.report_version = True
    sampled = []
    for step in range(1, 5):
        if step == 2:  # the sync after step 2's update goes wrong
            if fault == "mismatch":
                algorithm.actor.replicas.mismatch = says
            else:
                algorithm.actor.replicas.lose_syncs = True
        out, _ = pipe.generated(pipe.next_batch())
        sampled.append(int(out["sampled_with"][0, 0]))
        algorithm.actor.version += 1
        pipe.step_done()
    assert len(failures) == 1 and isinstance(failures[0], WorkerDiedError)
    assert says in str(failures[0])
    if fault == "mismatch":
        # reported with the sync of version 2, read when step 3's batch is taken: both batches
        # ahead are sampled again on fresh replicas with version 2
        assert sampled == [0, 0, 2, 2]
    else:
        # step 3's batch was sampled before the lost sync (version 1, as due); step 4's, after
        # it, carries version 1 where 2 was synced: sampled again with the current version 3
        assert sampled == [0, 0, 1, 3]


class _FakePartialReplicas(_FakeReplicas):
    """Partial rollouts on the fake pool: each segment call adds one token per row, tagged
    (``token_versions``) with the version the pipeline passed and recorded (``held``) with
    the version the replica really held; the last segment reports the replica's count of
    its syncs and the last tag, as a real replica's does."""

    def __init__(self, actor: _FakeActor, width: int) -> None:
        super().__init__(actor)
        self.width = width
        self.start_partial = _Call(
            lambda batch, tokens, final, seed, version=None: self._call(
                "start_partial", lambda: self._segment(self._empty(len(batch)), final, version)
            )
        )
        self.continue_partial = _Call(
            lambda partial, tokens, final, seed, version=None: self._call(
                "continue_partial",
                lambda: self._segment(getattr(partial, "value", partial), final, version),
            )
        )

    def _empty(self, rows: int) -> Batch:
        minus = torch.full((rows, self.width), -1.0)
        return Batch.from_dict(tensors={"token_versions": minus, "held": minus.clone()})

    def _segment(self, state: Batch, final: bool, version: int) -> Batch:
        assert self.weights is not None, "generated before its first weight sync"
        tagged, held = state["token_versions"].clone(), state["held"].clone()
        k = int((tagged[0] >= 0).sum())
        tagged[:, k], held[:, k] = float(version), float(self.weights)
        out = Batch.from_dict(tensors={"token_versions": tagged, "held": held})
        out.meta["policy_version"] = version
        if final:
            out["response_mask"] = torch.ones_like(tagged)
            out.meta["weights_version"] = self.syncs
        return out


def _partial_pipeline(restart: Any, depth: int = 2) -> tuple[GenerationPipeline, _FakeAlgorithm]:
    algorithm = _FakeAlgorithm()
    algorithm.actor = _SyncingActor()
    algorithm.actor.replicas = _FakePartialReplicas(algorithm.actor, width=3)
    pipe = GenerationPipeline(
        algorithm,
        _Loader(),
        depth=depth,
        behaviour_log_probs=False,
        rollout=algorithm.actor.replicas,
        restart_rollout=restart,
        partial_tokens=2,
        response_length=6,  # three segments
    )
    return pipe, algorithm


def test_a_skipped_sync_under_partial_rollouts_is_caught_and_no_token_mistagged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sync after step 1's update is skipped: segments submitted after it would be tagged
    version 1 on replicas holding 0. The batch's check catches it (the replicas' sync count
    against the last segment's tag), the replicas are restarted, and every token trained
    on carries the version that sampled it."""
    from hfsdk_faults import faults

    monkeypatch.setenv(faults.FAULT_ENV, "sync_skip:1")
    monkeypatch.setattr(faults, "_FIRED", set())
    failures: list[BaseException] = []

    def restart(exc: BaseException) -> _FakeReplicas:
        failures.append(exc)
        algorithm.actor.replicas = _FakePartialReplicas(algorithm.actor, width=3)
        return algorithm.actor.replicas

    pipe, algorithm = _partial_pipeline(restart)
    versions = []
    for _ in range(1, 6):
        out, metrics = pipe.generated(pipe.next_batch())
        assert torch.equal(out["token_versions"], out["held"])  # no token mistagged
        versions.append(out["token_versions"][0].tolist())
        algorithm.actor.version += 1
        pipe.step_done()
    assert len(failures) == 1 and isinstance(failures[0], WorkerDiedError)
    assert "generated with weights version 0 where version 1 was synced" in str(failures[0])
    # step 2's batch (two segments after the skip) is sampled again with version 1, and
    # step 3's, resubmitted beside it, continues after step 2's update with version 2
    assert versions[:3] == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 2.0, 2.0]]
    assert metrics["async/rollout_restarts"] == 1.0


def test_partial_batches_continued_on_a_resumed_runs_fresh_replicas_pass_the_check() -> None:
    """A resumed run's fresh replicas count their syncs from the resumed version: the
    batches drawn before the checkpoint continue there, and the check reads their last
    segment against those replicas' count, not the ones that started them."""

    def no_restart(exc: BaseException) -> Any:
        raise AssertionError(f"restarted: {exc}")

    pipe, algorithm = _partial_pipeline(no_restart)
    for _ in range(2):
        pipe.generated(pipe.next_batch())
        algorithm.actor.version += 1
        pipe.step_done()
    state = pipe.state_dict()
    resumed, fresh = _partial_pipeline(no_restart)
    fresh.actor.version = algorithm.actor.version
    resumed.load_state_dict(state)
    for _ in range(3):
        out, _ = resumed.generated(resumed.next_batch())
        assert torch.equal(out["token_versions"], out["held"])
        fresh.actor.version += 1
        resumed.step_done()


def test_a_partial_batch_tagged_with_a_version_its_replicas_never_held_is_flagged() -> None:
    """The replicas' count of their verified syncs (one: version 0) against the version the
    last segment was tagged with (1): flagged, whatever the metrics."""
    from hfsdk_pipelines.pipeline import Ahead

    out = Batch.from_dict(tensors={"token_versions": torch.ones(2, 3)})
    out.meta.update(weights_version=1, policy_version=1)
    ahead = Ahead(prompts=out, version=0, generated=out, segments=3, replica_base=0)
    problem = GenerationPipeline._held_version_problem(ahead)
    assert problem is not None and "version 0 where version 1 was synced" in problem
    out.meta["weights_version"] = 2  # a second verified sync: it held version 1
    assert GenerationPipeline._held_version_problem(ahead) is None
    ahead.replica_base, out.meta["weights_version"] = 1, 1  # fresh replicas, first synced 1
    assert GenerationPipeline._held_version_problem(ahead) is None


class _EarlyEndingReplicas(_FakePartialReplicas):
    """Every row ends in its first segment: the later segment calls sample nothing, yet are
    tagged (``policy_version``) with the version passed, as a real replica's are."""

    def _segment(self, state: Batch, final: bool, version: int) -> Batch:
        first = not bool((state["token_versions"] >= 0).any())
        out = super()._segment(state, final, version)
        if not first:  # nothing sampled: undo the token the fake added
            out["token_versions"], out["held"] = state["token_versions"], state["held"]
        if final:
            out["response_mask"] = (out["token_versions"] >= 0).float()
        return out


def test_rollout_weights_version_is_one_some_token_was_sampled_with() -> None:
    """Under partial rollouts a batch whose rows all ended before its last segment reports
    the newest version its tokens were sampled with, not the later segments' tags; the
    held-version check still passes (no replica restart)."""

    def no_restart(exc: BaseException) -> Any:
        raise AssertionError(f"restarted: {exc}")

    algorithm = _FakeAlgorithm()
    algorithm.actor = _SyncingActor()
    algorithm.actor.replicas = _EarlyEndingReplicas(algorithm.actor, width=3)
    pipe = GenerationPipeline(
        algorithm,
        _Loader(),
        depth=2,
        behaviour_log_probs=False,
        rollout=algorithm.actor.replicas,
        restart_rollout=no_restart,
        partial_tokens=2,
        response_length=6,  # three segments, every row ended in the first
    )
    reported, sampled = [], []
    for _ in range(5):
        out, metrics = pipe.generated(pipe.next_batch())
        mask = out["response_mask"].bool()
        assert torch.equal(out["token_versions"], out["held"])
        reported.append(metrics["async/rollout_weights_version"])
        sampled.append(float(out["token_versions"][mask].max()))
        algorithm.actor.version += 1
        pipe.step_done()
    assert reported == sampled == [0.0, 0.0, 0.0, 1.0, 2.0]


def test_rollout_only_counts_no_update_and_syncs_nothing() -> None:
    """``trainer.mode: rollout_only`` trains nothing: the pipeline of its rollout pool keeps
    version 0 and sends the replicas the starting weights once, not after every step."""
    from hfsdk_pipelines.pipeline import build_pipeline

    config = load_run_config(
        "grpo",
        None,
        [
            *SMALL,
            "trainer.mode=rollout_only",
            "placement.pools.global.devices=1",
            "placement.pools.rollout.devices=1",
        ],
    )
    algorithm = _FakeAlgorithm()
    algorithm.actor = _SyncingActor()
    replicas = algorithm.actor.replicas = _FakeReplicas(algorithm.actor)
    pipe = build_pipeline(algorithm, _Loader(), config, replicas, None)
    rows = []
    for _ in range(3):
        _, metrics = pipe.generated(pipe.next_batch())
        rows.append(metrics)
        pipe.step_done()
    assert replicas.syncs == 1
    assert [r["async/weights_version"] for r in rows] == [0.0, 0.0, 0.0]
    assert [r["async/rollout_weights_version"] for r in rows] == [0.0, 0.0, 0.0]
    assert [r.get("sync/count", 0.0) for r in rows] == [1.0, 0.0, 0.0]


def test_a_failed_send_is_a_replica_failure_that_ends_the_session_with_no_restart_left() -> None:
    def no_restart_left(exc: BaseException) -> Any:
        raise exc

    pipe, algorithm = _replica_pipeline(no_restart_left)
    pipe.generated(pipe.next_batch())
    algorithm.actor.version += 1
    algorithm.actor.replicas.dead = True
    pipe.step_done()  # the send reports the failure; the receive fails with the replica
    with pytest.raises(WorkerDiedError, match="role 'rollout'"):
        pipe.generated(pipe.next_batch())


def test_a_failure_of_another_role_is_not_a_replica_restart() -> None:
    def restart(exc: BaseException) -> Any:
        raise AssertionError("the replicas were restarted for the actor's failure")

    pipe, _ = _replica_pipeline(restart)
    pipe.next_batch()
    head = pipe._current
    assert head is not None

    class _ActorDied(_Done):
        def result(self) -> Any:
            raise WorkerDiedError("actor died", role="actor", rank=0, method="gen", cause="x")

    head.generated = _ActorDied(None)
    with pytest.raises(WorkerDiedError, match="actor died"):
        pipe.generated(head.prompts)


def _fit(tmp_path: Path, run: str, *overrides: str) -> list[dict]:
    config = load_run_config("grpo", None, [*SMALL, *overrides])
    return Trainer(config, tmp_path / run, quiet=True).fit()


@pytest.mark.distributed
def test_one_step_off_trains_on_the_previous_weights_and_corrects_them(tmp_path: Path) -> None:
    rows = _fit(
        tmp_path,
        "run",
        "trainer.total_steps=3",
        "trainer.pipeline=one_step_off",
        "algorithm.is_correction=tis",
        "algorithm.is_cap=2.0",
    )
    assert [r["async/staleness_max"] for r in rows] == [0.0, 1.0, 1.0]
    # step 1 samples with the weights it trains: every importance weight is 1
    assert rows[0]["actor/is_weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert rows[0]["rollout/log_prob_diff_max"] == pytest.approx(0.0, abs=1e-5)
    # later steps sample with the weights before the last update: the ratios move, capped at 2
    assert rows[1]["rollout/log_prob_diff_max"] > 1e-3
    assert rows[1]["actor/is_ratio_max"] != pytest.approx(1.0, abs=1e-3)
    assert all(r["actor/is_weight_max"] <= 2.0 + 1e-6 for r in rows)


@pytest.mark.distributed
def test_async_staleness_reaches_and_keeps_max_staleness(tmp_path: Path) -> None:
    rows = _fit(
        tmp_path,
        "run",
        "trainer.total_steps=4",
        "trainer.pipeline=async",
        "trainer.max_staleness=2",
    )
    assert [r["async/staleness_max"] for r in rows] == [0.0, 1.0, 2.0, 2.0]
    assert [r["async/staleness_hist_2"] for r in rows] == [0.0, 0.0, 1.0, 1.0]


def _weights(run_dir: Path, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(
        str(run_dir / "checkpoints" / f"step_{step}" / "actor_hf" / "model.safetensors")
    )


@pytest.mark.slow
@pytest.mark.distributed
def test_one_step_off_resumes_exactly(tmp_path: Path) -> None:
    """The checkpoint holds the batch generated ahead; a resumed run trains on exactly it."""
    common = ("trainer.pipeline=one_step_off", "algorithm.is_correction=tis")
    straight = _fit(tmp_path, "straight", *common, "trainer.total_steps=4")
    _fit(tmp_path, "resumed", *common, "trainer.total_steps=2")
    resumed = _fit(tmp_path, "resumed", *common, "trainer.total_steps=4")
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]
    for a, b in zip(straight, resumed, strict=True):
        for key in (*COMPARED, "actor/is_weight_mean", "async/staleness_max"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), (a["step"], key)
    final_a, final_b = _weights(tmp_path / "straight", 4), _weights(tmp_path / "resumed", 4)
    for name in final_a:
        assert torch.equal(final_a[name], final_b[name]), name
    early = _weights(tmp_path / "resumed", 2)
    assert any(not torch.equal(early[n], final_b[n]) for n in early)


def test_an_algorithm_that_needs_on_policy_data_is_refused_with_the_config() -> None:
    # With the config (hfsdk config show too), no longer only at the run's preflight.
    with pytest.raises(HfsdkError, match=r"trainer.pipeline='one_step_off': algorithm 'remax'"):
        load_run_config("remax", None, [*SMALL, "trainer.pipeline=one_step_off"])


def test_sync_builds_no_pipeline(tmp_path: Path) -> None:
    config = load_run_config("grpo", None, SMALL)
    assert config.trainer.pipeline == "sync"
    trainer = Trainer(config, tmp_path / "run", quiet=True)
    try:
        assert trainer._build_pipeline(object(), object()) is None  # type: ignore[arg-type]
    finally:
        trainer.close()


def test_a_version_behind_the_synced_one_is_a_skipped_sync() -> None:
    assert check_version(3, 3, "the replicas") is None
    line = check_version(2, 3, "the replicas")
    assert line is not None and "version 2 where version 3" in line and "skipped" in line


class _SeededReplicas(_FakeReplicas):
    """Fake replicas that record each call's sampling seed by prompt number (and segment)."""

    def __init__(self, actor: _FakeActor, seeds: list[tuple[int, int, int]]) -> None:
        super().__init__(actor)
        self.seeds = seeds
        inner = self.generate_sequences.submit
        self.generate_sequences = _Call(lambda batch: self._record(batch, 1, inner(batch)))
        self.start_partial = _Call(
            lambda batch, tokens, last, seed, version: self._call(
                "start_partial", lambda: self._segment(batch, 1, seed)
            )
        )
        self.continue_partial = _Call(
            lambda done, tokens, last, seed, version: self._call(
                "continue_partial", lambda: self._segment(done, 0, seed)
            )
        )

    def _record(self, batch: Batch, segment: int, future: Any) -> Any:
        if not self.dead:
            self.seeds.append((int(batch["prompt_no"][0, 0]), segment, batch.meta["sampling_seed"]))
        return future

    def _segment(self, batch: Any, first: int, seed: int) -> Batch:
        batch = batch.value if isinstance(batch, _Future) else batch
        segment = 1 if first else int(batch.meta["segment"]) + 1
        self.seeds.append((int(batch["prompt_no"][0, 0]), segment, seed))
        out = Batch.from_dict(tensors={"prompt_no": batch["prompt_no"]})
        out.meta["segment"] = segment
        return out


def _seeded_pipeline(
    seeds: list[tuple[int, int, int]], kill_at: int | None, depth: int = 0
) -> tuple[GenerationPipeline, list[int]]:
    """A pipeline over seed-recording replicas run for 5 steps, the replicas killed at the
    start of step ``kill_at``; its seeds go to ``seeds``, its ``submitted`` per step back."""
    algorithm = _FakeAlgorithm()
    algorithm.actor = _SyncingActor()

    def restart(exc: BaseException) -> _FakeReplicas:
        algorithm.actor.replicas = _SeededReplicas(algorithm.actor, seeds)
        return algorithm.actor.replicas

    algorithm.actor.replicas = _SeededReplicas(algorithm.actor, seeds)
    pipe = GenerationPipeline(
        algorithm,
        _Loader(),
        depth=depth,
        behaviour_log_probs=False,
        rollout=algorithm.actor.replicas,
        restart_rollout=restart,
        seed=7,
    )
    submitted = []
    for step in range(1, 6):
        prompts = pipe.next_batch()
        if step == kill_at:  # the batch it submitted was lost with the replica
            algorithm.actor.replicas.dead = True
            pipe._current.generated = _Failing("generate")
        pipe.generated(prompts)
        submitted.append(pipe.submitted)
        algorithm.actor.version += 1
        pipe.step_done()
    return pipe, submitted


@pytest.mark.parametrize("depth", [0, 1])
def test_a_batch_submitted_again_after_a_replica_restart_keeps_its_sampling_seed(
    depth: int,
) -> None:
    # Before: the resubmission drew a new seed and shifted every later batch's seed by one.
    straight: list[tuple[int, int, int]] = []
    killed: list[tuple[int, int, int]] = []
    _, submitted = _seeded_pipeline(straight, None, depth)
    restarted, submitted_after_kill = _seeded_pipeline(killed, 3, depth)
    assert restarted.rollout_restarts == 1
    assert len(killed) > len(straight)  # some batches were generated twice
    seed_of = {(prompt, segment): seed for prompt, segment, seed in straight}
    assert len(seed_of) == len(straight)  # one call per batch, each with a seed of its own
    for prompt, segment, seed in killed:
        assert seed == seed_of[prompt, segment], (prompt, segment)
    assert submitted_after_kill == submitted  # the call counter did not move on resubmission
    assert seed_of[1, 1] == 7 * 1_000_003 + 1


def test_partial_rollouts_submitted_again_keep_each_segments_seed() -> None:
    seeds: list[tuple[int, int, int]] = []
    algorithm = _FakeAlgorithm()
    algorithm.actor = _SyncingActor()
    failed = []

    def restart(exc: BaseException) -> _FakeReplicas:
        failed.append(exc)
        algorithm.actor.replicas = _SeededReplicas(algorithm.actor, seeds)
        return algorithm.actor.replicas

    algorithm.actor.replicas = _SeededReplicas(algorithm.actor, seeds)
    pipe = GenerationPipeline(
        algorithm,
        _Loader(),
        depth=2,
        behaviour_log_probs=False,
        rollout=algorithm.actor.replicas,
        restart_rollout=restart,
        seed=0,
        partial_tokens=2,
        response_length=6,  # 3 segments per batch
    )
    pipe.next_batch()  # prompts 1-3, first segments: calls 1-3
    pipe.step_done()  # second segments of prompts 2 and 3: calls 4 and 5
    first = {(prompt, segment): seed for prompt, segment, seed in seeds}
    assert first == {(1, 1): 1, (2, 1): 2, (3, 1): 3, (2, 2): 4, (3, 2): 5}
    head = pipe._current

    def dies_once() -> None:
        if not failed:
            raise WorkerDiedError("gone", role="rollout", rank=0, method="x", cause="killed")

    pipe._recovering(dies_once, head)
    assert pipe.submitted == 5  # nothing drawn again
    assert seeds[len(first) :] == [(1, 1, 1), (2, 1, 2), (3, 1, 3)]
    pipe.step_done()  # the queue's next segments: the seeds they were given before
    assert seeds[len(first) + 3 :] == [(2, 2, 4), (3, 2, 5)]
    pipe.step_done()  # third segments, never submitted before: new call numbers
    assert seeds[len(first) + 5 :] == [(2, 3, 6), (3, 3, 7)] and pipe.submitted == 7


def test_the_replica_restarts_count_survives_a_resume() -> None:
    # Before: a resumed pipeline reported async/rollout_restarts 0 again ("restarts so far").
    def restart(exc: BaseException) -> _FakeReplicas:
        algorithm.actor.replicas = _FakeReplicas(algorithm.actor)
        return algorithm.actor.replicas

    pipe, algorithm = _replica_pipeline(restart)
    for step in range(1, 4):
        if step == 2:
            algorithm.actor.replicas.dead = True
        pipe.generated(pipe.next_batch())
        algorithm.actor.version += 1
        pipe.step_done()
    assert pipe.rollout_restarts == 1
    state = pipe.state_dict()
    resumed, algorithm = _replica_pipeline(restart)
    algorithm.actor.version = 3
    resumed.load_state_dict(state)
    _, metrics = resumed.generated(resumed.next_batch())
    assert metrics["async/rollout_restarts"] == 1.0
    # A checkpoint written before the count was kept resumes from 0.
    older, _ = _replica_pipeline(restart)
    older.load_state_dict({k: v for k, v in state.items() if k != "rollout_restarts"})
    assert older.rollout_restarts == 0


class _LogProbRollout:
    """The actor's generation: reports ``rollout_log_probs`` (zeros) when ``reports``."""

    def __init__(self, calls: dict[str, int], reports: bool) -> None:
        self.calls, self.reports = calls, reports

    def submit(self, batch: Batch) -> _Future:
        self.calls["generate"] += 1
        rows = len(batch)
        tensors = {"response_mask": torch.ones(rows, 3)}
        if self.reports:
            tensors["rollout_log_probs"] = torch.zeros(rows, 3)
        return _Future(Batch.from_dict(tensors=tensors))


class _CountedLogProbs:
    """The actor's ``compute_log_prob``: ones, counted."""

    def __init__(self, calls: dict[str, int]) -> None:
        self.calls = calls

    def submit(self, generated: _Future) -> _Future:
        self.calls["compute_log_prob"] += 1
        return _Future(Batch.from_dict(tensors={"old_log_probs": torch.ones(2, 3)}))


@pytest.mark.parametrize(("backend", "reports"), [("vllm", True), ("hf", False)])
def test_behaviour_log_probs_are_computed_only_when_the_rollout_reports_none(
    backend: str, reports: bool
) -> None:
    """Colocated ``one_step_off`` needing behaviour log-probs: a rollout whose contract says it
    reports ``rollout_log_probs`` (vLLM) keeps its own and no actor forward is queued; one that
    reports none gets the actor's ``compute_log_prob`` behind each generation."""
    from hfsdk_pipelines.pipeline import build_pipeline

    config = load_run_config(
        "grpo",
        None,
        [
            *SMALL,
            "trainer.pipeline=one_step_off",
            "trainer.max_mismatch_kl=1.0",
            f"rollout.backend={backend}",
        ],
    )
    calls = {"generate": 0, "compute_log_prob": 0}
    algorithm = _FakeAlgorithm()
    algorithm.actor.generate_sequences = _LogProbRollout(calls, reports)  # type: ignore[assignment]
    algorithm.actor.compute_log_prob = _CountedLogProbs(calls)  # type: ignore[assignment]
    pipe = build_pipeline(algorithm, _Loader(), config, None, None)
    for _ in range(4):
        out, _ = pipe.generated(pipe.next_batch())
        pipe.step_done()
        kept = torch.zeros(2, 3) if reports else torch.ones(2, 3)
        assert torch.equal(out["rollout_log_probs"], kept)
    assert calls == {"generate": 5, "compute_log_prob": 0 if reports else 5}
