"""Futures of worker-group calls and the data references workers resolve themselves.

A non-blocking call returns a :class:`CallFuture` holding one pair of Ray
object references per rank: the method's result and a tiny *info* record
``(ok, rows, failure[, busy_s])``. The controller waits on the infos only, so it can
report a failing or dead rank without fetching any bulk result. Passing a
future into another group's call sends each worker a :class:`DataRef`, which
the worker resolves from the object store itself: the data never passes
through the controller.

Ray is imported inside functions so that importing this module stays cheap.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.errors import WorkerDiedError, WorkerError, WorkerTimeoutError

if TYPE_CHECKING:
    from hfsdk.core.workers.protocols.types import TransferProtocol

Info = tuple[Any, ...]
"""What a worker returns beside each result: ``(ok, rows or None, failure or None, busy_s)``.

``busy_s`` (seconds the method body ran, argument fetching excluded) may be
missing from infos made elsewhere; read it with :func:`info_busy_s`.
"""


def info_busy_s(info: Info) -> float:
    """Seconds the method body ran (0 when the info does not say)."""
    return float(info[3]) if len(info) > 3 else 0.0


class LocalRef:
    """A value already computed in this process, standing in for a Ray object reference.

    In-process workers (``trainer.executor: local``) return their results and
    infos wrapped in these, so futures, data references and protocols work
    unchanged without Ray.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def all_local(refs: Iterable[Any]) -> bool:
    """Whether every reference in ``refs`` is an in-process :class:`LocalRef`."""
    return all(isinstance(ref, LocalRef) for ref in refs)


def fetch(refs: Sequence[Any], timeout: float | None) -> list[Any]:
    """The values of ``refs``: in-process ones at once, Ray references with ``ray.get``."""
    if all_local(refs):
        return [ref.value for ref in refs]
    import ray

    return ray.get(list(refs), timeout=timeout)


class CallClock:
    """Totals of the blocking calls the controller made: wall time and the workers' busy time.

    The difference is what the controller adds to each call (dispatch,
    serialization, transfer, waiting on the slowest rank to report, collect):
    its overhead. A training session owns one and hands it to every worker group it
    starts and to the algorithm (``AlgorithmContext.clock``); the trainer reads and resets
    it once per step.
    """

    def __init__(self) -> None:
        self.wall_s = 0.0
        self.busy_s = 0.0
        self.calls = 0

    def record(self, wall_s: float, busy_s: float) -> None:
        """Add one call: its wall time on the controller and its slowest rank's busy time."""
        self.wall_s += wall_s
        self.busy_s += min(busy_s, wall_s)
        self.calls += 1

    def take(self) -> tuple[float, float, int]:
        """``(wall_s, busy_s, calls)`` since the last take; resets the totals."""
        out = (self.wall_s, self.busy_s, self.calls)
        self.wall_s, self.busy_s, self.calls = 0.0, 0.0, 0
        return out


POLL_S = 0.25
"""How often a waiting controller looks at partial results (fail fast on the first error)."""


@attrs.frozen(kw_only=True)
class CollectSpec:
    """What a protocol's collect needs: whose results, in which order, how much padding."""

    ranks: tuple[int, ...]
    pad: int = 0
    state: Any = None


# ---------------------------------------------------------------------- worker-side references


class DataRef:
    """A value a worker fetches and assembles itself from other workers' results.

    ``transform`` (a picklable, module-level function or ``functools.partial``)
    turns the fetched results, in order, into the argument the method receives.
    """

    __slots__ = ("info_refs", "result_refs", "source", "transform")

    def __init__(
        self,
        *,
        result_refs: Sequence[Any],
        info_refs: Sequence[Any],
        source: str,
        transform: Callable[[list[Any]], Any],
    ) -> None:
        self.result_refs = tuple(result_refs)
        self.info_refs = tuple(info_refs)
        self.source = source
        self.transform = transform

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_data_ref, (self.result_refs, self.info_refs, self.source, self.transform))

    def resolve(self) -> Any:
        """Fetch the referenced results (checking the producers succeeded) and assemble.

        Bounded by :func:`data_timeout_s`: a producer that never finishes fails
        this consumer instead of freezing it.
        """
        timeout_s = data_timeout_s()
        try:
            for info in fetch(self.info_refs, timeout_s):
                if not info[0]:  # (ok, rows, failure, ...)
                    raise HfsdkError(f"input from {self.source} failed: {info[2].summary()}")
            return self.transform(fetch(self.result_refs, timeout_s))
        except Exception as exc:
            if not is_ray_error(exc, "GetTimeoutError"):
                raise
            raise HfsdkError(
                f"input from {self.source} did not arrive within {timeout_s:g} s "
                f"({DATA_TIMEOUT_ENV}); its producer is stuck or its node is gone"
            ) from None


DATA_TIMEOUT_ENV = "HFSDK_CALL_TIMEOUT_S"
"""Worker environment variable bounding data-future resolution (the session sets it from
``trainer.worker_timeout_s``)."""

DEFAULT_DATA_TIMEOUT_S = 3600.0
READY_FETCH_S = 60.0
"""Bound on fetching a small object ``ray.wait`` already reported ready."""


def data_timeout_s() -> float:
    """Seconds a worker waits for a data future: ``HFSDK_CALL_TIMEOUT_S``, else one hour."""
    import os

    try:
        value = float(os.environ.get(DATA_TIMEOUT_ENV, DEFAULT_DATA_TIMEOUT_S))
    except ValueError:
        value = DEFAULT_DATA_TIMEOUT_S
    return value if value > 0 else DEFAULT_DATA_TIMEOUT_S


def _rebuild_data_ref(
    result_refs: tuple[Any, ...], info_refs: tuple[Any, ...], source: str, transform: Any
) -> DataRef:
    return DataRef(result_refs=result_refs, info_refs=info_refs, source=source, transform=transform)


def resolve_argument(value: Any) -> Any:
    """``value`` with a :class:`DataRef` replaced by what it refers to (worker side)."""
    return value.resolve() if isinstance(value, DataRef) else value


def take_single(values: list[Any]) -> Any:
    """Transform: the one fetched value as is."""
    return values[0]


def apply_collect(
    collect: Callable[[list[Any], CollectSpec], Any], spec: CollectSpec, values: list[Any]
) -> Any:
    """Transform: run the producing protocol's collect on the worker."""
    return collect(values, spec)


def take_segments(segments: Sequence[tuple[int, int, int]], values: list[Any]) -> Any:
    """Transform: concatenate ``values[i][start:stop]`` for each ``(i, start, stop)``.

    Works on :class:`~hfsdk.core.batch.Batch` and on lists; batches' rollout
    metrics are merged as the protocols' collect merges them.
    """
    pieces = [_slice_rows(values[i], start, stop) for i, start, stop in segments]
    if isinstance(pieces[0], list):
        return [item for piece in pieces for item in piece]
    from hfsdk.core.batch import Batch
    from hfsdk.core.rollout_output import merge_rollout_metrics

    return pieces[0] if len(pieces) == 1 else Batch.concat(merge_rollout_metrics(pieces))


def _slice_rows(value: Any, start: int, stop: int) -> Any:
    if isinstance(value, (list, tuple)):
        return list(value[start:stop])
    return value.index(slice(start, stop))


# ---------------------------------------------------------------------- controller-side future


class CallFuture:
    """The pending result of a worker-group call.

    ``result()`` waits (failing fast on the first failed or dead rank),
    fetches the collected ranks' results and applies the protocol's collect.
    Pass the future itself into another group's call to hand the data over
    worker to worker.
    """

    def __init__(
        self,
        *,
        role: str,
        method: str,
        protocol: TransferProtocol,
        spec: CollectSpec,
        result_refs: Mapping[int, Any],
        info_refs: Mapping[int, Any],
        timeout_s: float | None = None,
        describe_rank: Callable[[int], str] | None = None,
    ) -> None:
        self.role = role
        self.method = method
        self.protocol = protocol
        self.spec = spec
        self.result_refs = dict(result_refs)
        self.info_refs = dict(info_refs)
        self.timeout_s = timeout_s
        self._describe_rank = describe_rank
        self._infos: dict[int, Info] | None = None
        self._value: Any = _MISSING

    def __repr__(self) -> str:
        state = "done" if self._infos is not None else "pending"
        return f"<CallFuture {self.role}.{self.method} via {self.protocol.name} ({state})>"

    @property
    def source(self) -> str:
        """``role.method`` (used in messages)."""
        return f"{self.role}.{self.method}"

    # -------------------------------------------------------------- waiting

    def done(self) -> bool:
        """Whether every rank has finished (successfully or not); never blocks."""
        if self._infos is not None:
            return True
        refs = list(self.info_refs.values())
        if all_local(refs):
            return True
        import ray

        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        return len(ready) == len(refs)

    def wait(self, timeout: float | None = None) -> None:
        """Block until every rank finished; raise the first failure (see :meth:`result`)."""
        self._wait_infos(self.timeout_s if timeout is None else timeout)

    def result(self, timeout: float | None = None) -> Any:
        """The collected result.

        Raises :class:`WorkerError` (method raised; names role, rank, method and
        the worker traceback), :class:`WorkerDiedError` (process gone) or
        :class:`WorkerTimeoutError` after ``timeout`` seconds (default: the
        group's ``call_timeout_s``; ``None`` waits as long as workers live).
        """
        if self._value is not _MISSING:
            return self._value
        self._wait_infos(self.timeout_s if timeout is None else timeout)
        refs = [self.result_refs[rank] for rank in self.spec.ranks]
        try:
            # The infos arrived, so the results exist; the bound only guards a lost transfer.
            values = fetch(refs, self.timeout_s or DEFAULT_DATA_TIMEOUT_S)
        except Exception as exc:  # Ray: lost objects, a node gone after the call
            if not is_ray_error(exc):
                raise
            raise WorkerError(
                f"role {self.role!r} method {self.method!r}: fetching results failed: {exc}",
                role=self.role,
                rank=-1,
                method=self.method,
            ) from None
        self._value = self.protocol.collect(values, self.spec)
        return self._value

    def busy_s(self) -> float:
        """The slowest seconds in the method body (waits for the infos)."""
        infos = self._wait_infos(self.timeout_s)
        return max((info_busy_s(info) for info in infos.values()), default=0.0)

    def shard_rows(self) -> list[int | None]:
        """Row counts of the collected ranks' results (waits; fetches only tiny infos)."""
        infos = self._wait_infos(self.timeout_s)
        return [infos[rank][1] for rank in self.spec.ranks]

    def _wait_infos(self, timeout: float | None) -> dict[int, Info]:
        if self._infos is None:
            self._infos = wait_for_infos(
                self.info_refs,
                role=self.role,
                method=self.method,
                timeout=timeout,
                describe_rank=self._describe_rank,
            )
        return self._infos

    # -------------------------------------------------------------- handing over

    def as_data_ref(self) -> DataRef:
        """A reference to the whole collected value (each receiving worker collects it)."""
        ranks = self.spec.ranks
        return DataRef(
            result_refs=[self.result_refs[r] for r in ranks],
            info_refs=[self.info_refs[r] for r in ranks],
            source=self.source,
            transform=functools.partial(apply_collect, self.protocol.collect, self.spec),
        )

    def shard_ref(self, index: int) -> DataRef:
        """A reference to the ``index``-th collected rank's result as is."""
        rank = self.spec.ranks[index]
        return DataRef(
            result_refs=[self.result_refs[rank]],
            info_refs=[self.info_refs[rank]],
            source=f"{self.source} rank {rank}",
            transform=take_single,
        )

    def segments_ref(self, segments: Sequence[tuple[int, int, int]]) -> DataRef:
        """A reference to rows ``[start, stop)`` of the ``i``-th collected result, per segment."""
        used = sorted({i for i, _, _ in segments})
        renumber = {i: k for k, i in enumerate(used)}
        ranks = [self.spec.ranks[i] for i in used]
        return DataRef(
            result_refs=[self.result_refs[r] for r in ranks],
            info_refs=[self.info_refs[r] for r in ranks],
            source=self.source,
            transform=functools.partial(
                take_segments, tuple((renumber[i], a, b) for i, a, b in segments)
            ),
        )


_MISSING = object()


# ---------------------------------------------------------------------- waiting and errors


def wait_for_infos(
    info_refs: Mapping[int, Any],
    *,
    role: str,
    method: str,
    timeout: float | None,
    describe_rank: Callable[[int], str] | None = None,
) -> dict[int, Info]:
    """Wait for every rank's info; raise on the first failure, death or the timeout.

    Failing fast matters: when one rank raises, the others may be blocked in a
    collective waiting for it and would never finish.
    """
    if all_local(info_refs.values()):
        done = {rank: ref.value for rank, ref in info_refs.items()}
        _raise_first_failure(done)
        return done
    import ray

    pending = {ref: rank for rank, ref in info_refs.items()}
    infos: dict[int, Info] = {}
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending:
        wait_s = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=wait_s)
        for ref in sorted(ready, key=pending.__getitem__):
            rank = pending.pop(ref)
            try:
                infos[rank] = ray.get(ref, timeout=READY_FETCH_S)  # ready: bound a lost node
            except ray.exceptions.RayActorError as exc:
                raise _died_error(role, rank, method, exc, describe_rank) from None
            except ray.exceptions.RayError as exc:
                where = describe_rank(rank) if describe_rank else f"rank {rank}"
                text = str(exc)
                hint = ""
                if "No module named" in text:
                    hint = (
                        "\nthe worker process could not import a module the call needs; install "
                        "it on every node or put its directory on PYTHONPATH before Ray starts"
                    )
                raise WorkerError(
                    f"role {role!r} {where} method {method!r} failed in Ray: "
                    f"{_first_lines(text, 6)}{hint}",
                    role=role,
                    rank=rank,
                    method=method,
                ) from None
        _raise_first_failure(infos)
        if pending and deadline is not None and time.monotonic() >= deadline:
            late = sorted(pending.values())
            raise WorkerTimeoutError(
                f"role {role!r} method {method!r}: ranks {late} did not finish within "
                f"{timeout:g} s; raise the timeout (call_timeout_s, or result(timeout=...)) "
                "or look for a rank stuck in a collective",
                role=role,
                ranks=late,
                method=method,
            )
    return infos


def _raise_first_failure(infos: Mapping[int, Info]) -> None:
    """Raise the lowest failed rank's error (naming the other failed ranks)."""
    failed = sorted(rank for rank, info in infos.items() if not info[0])
    if failed:
        failure = infos[failed[0]][2]
        assert failure is not None
        raise failure.to_error(failed[1:])


def is_ray_error(exc: BaseException, name: str = "RayError") -> bool:
    """Whether ``exc`` is Ray's exception class ``name`` (Ray is not imported for this)."""
    import sys

    ray_exceptions = sys.modules.get("ray.exceptions")
    return ray_exceptions is not None and isinstance(exc, getattr(ray_exceptions, name))


# Most specific first: Ray's "is dead because ... Worker exit type/detail" sentence.
_CAUSE_RES = (
    re.compile(r"The actor is dead because[^\n]*"),
    re.compile(r"Worker exit type:[^\n]*"),
    re.compile(r"The actor died[^\n]*"),
)


def death_cause(exc: BaseException) -> str:
    """Ray's reason an actor died, trimmed to the exit type and detail."""
    text = str(exc)
    for pattern in _CAUSE_RES:
        if match := pattern.search(text):
            return match.group(0).split(" Some common causes", 1)[0].strip()
    return _first_lines(text, 2)


def _died_error(
    role: str,
    rank: int,
    method: str,
    exc: BaseException,
    describe_rank: Callable[[int], str] | None,
) -> WorkerDiedError:
    cause = death_cause(exc)
    where = describe_rank(rank) if describe_rank else f"rank {rank}"
    return WorkerDiedError(
        f"role {role!r} {where} died during method {method!r}: {cause}",
        role=role,
        rank=rank,
        method=method,
        cause=cause,
    )


def _first_lines(text: str, n: int) -> str:
    return "\n".join(text.strip().splitlines()[:n])
