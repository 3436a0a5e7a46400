"""Saving and restoring torch's random number generators: the CPU one and every CUDA one.

Resuming exactly on a GPU needs the CUDA generators too (sampling in generation, dropout), not
only the CPU one. A state saved without CUDA loads anywhere; CUDA states are restored only when
the same number of CUDA devices is visible. A seeded block (:func:`seeded_rng`) restores what
it seeded.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import torch

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def seeded_rng(seed: int | None) -> Iterator[None]:
    """The block runs seeded with ``seed`` (``None``: unseeded); after it every generator it
    seeded is as before: the CPU one, and the CUDA devices' where CUDA is in use. Where it is
    not, only the CPU generator is seeded: ``torch.manual_seed`` would queue a CUDA seed that
    outlives the block (and forking CUDA's would start it in a process that never used it)."""
    cuda = torch.cuda.is_initialized()
    with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if cuda else []):
        if seed is not None:
            (torch.manual_seed if cuda else torch.default_generator.manual_seed)(seed)
        yield


def torch_rng_state() -> dict[str, Any]:
    """``{"cpu": ..., "cuda": [per-device states] or None}``."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return {"cpu": torch.get_rng_state(), "cuda": cuda}


def set_torch_rng_state(state: Any) -> None:
    """Restore what :func:`torch_rng_state` returned (or a bare CPU state: the old format)."""
    if isinstance(state, torch.Tensor):
        torch.set_rng_state(state)
        return
    torch.set_rng_state(state["cpu"])
    cuda = state.get("cuda")
    if cuda is None:
        return
    if not torch.cuda.is_available() or torch.cuda.device_count() != len(cuda):
        logger.warning(
            "checkpoint holds RNG states of %d CUDA devices but %d are visible; CUDA random "
            "streams start fresh (sampling will differ from an uninterrupted run)",
            len(cuda),
            torch.cuda.device_count() if torch.cuda.is_available() else 0,
        )
        return
    torch.cuda.set_rng_state_all(cuda)
