"""Errors raised by the worker runtime.

Bad requests (an infeasible pool, an unknown protocol, arguments a protocol
cannot split) are :class:`~hfsdk.core.errors.HfsdkError` (a ``ValueError``).
Failures inside running workers are :class:`WorkerError` (a ``RuntimeError``)
and always name the role, the rank, the method and what happened there.
"""

from __future__ import annotations

from typing import Any

from hfsdk.core.errors import HfsdkError

CALL_DEADLINE = "CallDeadline"
"""``WorkerFailure.exc_type`` of a call the worker interrupted at its deadline."""


class InfeasibleResourcesError(HfsdkError):
    """A resource pool asks for more devices than the cluster has (asked vs available)."""


class ResourceTimeoutError(HfsdkError, TimeoutError):
    """A feasible resource pool could not be placed in time (other pools hold the devices)."""


class WorkerError(RuntimeError):
    """A worker method raised; the message names role, rank, method and the worker traceback."""

    def __init__(
        self,
        message: str,
        *,
        role: str,
        rank: int,
        method: str,
        exc_type: str | None = None,
        worker_traceback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.role = role
        self.rank = rank
        self.method = method
        self.exc_type = exc_type
        self.worker_traceback = worker_traceback


class WorkerDiedError(WorkerError):
    """A worker process exited (crash, kill, lost node); ``cause`` is Ray's exit reason."""

    def __init__(self, message: str, *, role: str, rank: int, method: str, cause: str) -> None:
        super().__init__(message, role=role, rank=rank, method=method)
        self.cause = cause


class WorkerTimeoutError(WorkerError, TimeoutError):
    """Ranks did not finish a call within the configured timeout (``ranks`` lists them)."""

    def __init__(self, message: str, *, role: str, ranks: list[int], method: str) -> None:
        super().__init__(message, role=role, rank=ranks[0] if ranks else -1, method=method)
        self.ranks = ranks


class WorkerFailure:
    """What a worker reports when a method raised (sent back instead of raising).

    Returning the failure as data keeps it apart from Ray's own errors, lets
    the controller check it without fetching the (absent) result, and lets a
    call that only waits for this one (colocated roles) go on.
    """

    __slots__ = ("exc_type", "message", "method", "node_ip", "pid", "rank", "role", "traceback")

    def __init__(
        self,
        *,
        role: str,
        rank: int,
        method: str,
        exc_type: str,
        message: str,
        traceback: str,
        pid: int,
        node_ip: str,
    ) -> None:
        self.role = role
        self.rank = rank
        self.method = method
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback
        self.pid = pid
        self.node_ip = node_ip

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_failure, (self.__getstate__(),))

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def summary(self) -> str:
        """``role 'actor' rank 2 (pid 11 on 10.0.0.1) method 'f' raised ValueError: ...``."""
        return (
            f"role {self.role!r} rank {self.rank} (pid {self.pid} on {self.node_ip}) "
            f"method {self.method!r} raised {self.exc_type}: {self.message}"
        )

    def to_error(self, also_failed: list[int] | None = None) -> WorkerError:
        """The controller-side exception, with the worker traceback in its message."""
        more = f" (ranks {also_failed} failed too)" if also_failed else ""
        if self.exc_type == CALL_DEADLINE:
            where = f"role {self.role!r} rank {self.rank} (pid {self.pid} on {self.node_ip})"
            text = f"{where} method {self.method!r} {self.message}{more}"
            timeout = WorkerTimeoutError(
                f"{text}\n--- where it hung ---\n{self.traceback.rstrip()}",
                role=self.role,
                ranks=[self.rank, *(also_failed or [])],
                method=self.method,
            )
            timeout.worker_traceback = self.traceback
            return timeout
        message = f"{self.summary()}{more}\n--- worker traceback ---\n{self.traceback.rstrip()}"
        return WorkerError(
            message,
            role=self.role,
            rank=self.rank,
            method=self.method,
            exc_type=self.exc_type,
            worker_traceback=self.traceback,
        )


def _rebuild_failure(state: dict[str, Any]) -> WorkerFailure:
    return WorkerFailure(**state)
