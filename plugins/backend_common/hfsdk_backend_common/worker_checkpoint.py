"""A worker's part of a checkpoint: its engine's files plus this rank's sampling RNGs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from hfsdk import HfsdkError, load_checkpoint_file

RNG_FILE = "rng_rank{rank}.pt"
"""Each rank's RNG states, beside the engine's files."""

logger = logging.getLogger(__name__)


def save_rank_checkpoint(
    engine: Any, directory: str, rank: int, rng_state: Callable[[], Any]
) -> str:
    """``engine.save_checkpoint(directory)``, then this rank's ``rng_state()``."""
    path = Path(directory)
    engine.save_checkpoint(path)
    torch.save(rng_state(), path / RNG_FILE.format(rank=rank))
    return str(path)


def load_rank_checkpoint(
    engine: Any,
    directory: str,
    rank: int,
    set_rng_state: Callable[[Any], None],
    after_load: Callable[[], None],
) -> str:
    """Restore what :func:`save_rank_checkpoint` wrote; ``after_load`` runs before the RNGs.

    The RNGs come last so that whatever ``after_load`` draws (a rollout reloading
    its engine) does not shift the stream a resumed run continues from.
    """
    path = Path(directory)
    engine.load_checkpoint(path)
    after_load()
    rng = path / RNG_FILE.format(rank=rank)
    if rng.exists():
        set_rng_state(_load_rng_file(rng))
    else:  # older checkpoints have none; the run goes on, but not as it would have
        logger.warning(
            "checkpoint %s has no %s: rank %d samples from a fresh RNG stream, so the resumed "
            "run does not replay the original one",
            path,
            rng.name,
            rank,
        )
    return str(path)


def _load_rng_file(path: Path) -> Any:
    """The RNG states in ``path``; a damaged file is named (torch's own error names none)."""
    try:
        return load_checkpoint_file(path)
    except HfsdkError:  # names the file already
        raise
    except Exception as exc:
        why = (str(exc).strip().splitlines() or [""])[0]
        raise HfsdkError(
            f"RNG file {str(path)!r} of the checkpoint cannot be read ({type(exc).__name__}: "
            f"{why}); it is damaged: resume from (or export) another checkpoint"
        ) from None
