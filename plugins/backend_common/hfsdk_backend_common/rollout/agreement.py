"""A per-rank step that fails on every rank at once (one message) instead of hanging the rest.

A rollout that reloads its engine from ``ActorSource.hf_weights`` on every
rank must not stop consuming the stream when its own engine fails: the
stream's gathers are collective, so the other ranks would wait in them until
the process group's timeout. :func:`on_every_rank` keeps this rank's part of
the collectives going (``drain``), then agrees on success over the group.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from hfsdk import HfsdkError

T = TypeVar("T")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def on_every_rank(
    step: Callable[[], T],
    *,
    what: str,
    group: Any = None,
    drain: Callable[[], None] | None = None,
    device: torch.device | str = "cpu",
) -> T:
    """``step()`` on this rank; raise :class:`HfsdkError` on every rank if it failed on any.

    ``drain`` runs after a local failure so this rank still takes its part in
    the collectives ``step`` was in the middle of (e.g. exhausting a weight
    stream). ``group``: the ranks that run ``step`` together (``None``: the
    default group; no agreement without torch.distributed or with one rank);
    ``device``: where the flag lives (CUDA for NCCL).
    """
    error: BaseException | None = None
    result: Any = None
    try:
        result = step()
    except Exception as exc:  # every failure must reach the agreement below
        error = exc
        if drain is not None:
            with contextlib.suppress(Exception):  # the first failure is the one to report
                drain()
    if dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1:
        failed = torch.tensor([1.0 if error is not None else 0.0], device=device)
        dist.all_reduce(failed, op=dist.ReduceOp.MAX, group=group)
        if error is None and failed.item() > 0:
            raise HfsdkError(
                f"{what} failed on another rank of the actor (its log says why); stopping "
                "this rank too"
            )
    if error is not None:
        raise HfsdkError(f"{what} failed on this rank: {_first_line(error)}") from error
    return result
