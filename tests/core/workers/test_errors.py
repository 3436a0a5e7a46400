"""Worker failures: what the controller's exception says, and that failures pickle."""

from __future__ import annotations

import pickle

from hfsdk.core.workers.errors import WorkerError, WorkerFailure


def failure() -> WorkerFailure:
    return WorkerFailure(
        role="critic",
        rank=3,
        method="compute_values",
        exc_type="ZeroDivisionError",
        message="division by zero",
        traceback="Traceback (most recent call last):\n  ...\nZeroDivisionError: division by zero\n",
        pid=4242,
        node_ip="10.0.0.7",
    )


def test_failure_becomes_an_error_naming_role_rank_method_and_traceback() -> None:
    error = pickle.loads(pickle.dumps(failure())).to_error(also_failed=[5])
    assert isinstance(error, WorkerError)
    assert (error.role, error.rank, error.method, error.exc_type) == (
        "critic",
        3,
        "compute_values",
        "ZeroDivisionError",
    )
    first_line = str(error).splitlines()[0]
    assert first_line == (
        "role 'critic' rank 3 (pid 4242 on 10.0.0.7) method 'compute_values' raised "
        "ZeroDivisionError: division by zero (ranks [5] failed too)"
    )
    assert "--- worker traceback ---" in str(error)
    assert error.worker_traceback.endswith("division by zero\n")
