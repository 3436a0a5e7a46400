"""A megatron rank's random state for exact resume: torch's CPU and CUDA generators and
megatron's model-parallel CUDA RNG tracker.

On a GPU, sampling and dropout draw from the CUDA generators, and megatron's
tensor-parallel regions draw from the tracker's named states (seeded by
``model_parallel_cuda_manual_seed``); restoring only the CPU generator would
make a resumed run diverge from an uninterrupted one. Off CUDA the state is
:func:`hfsdk.torch_rng_state`'s (``cuda`` is ``None``, no tracker).
"""

from __future__ import annotations

from typing import Any

import torch

from hfsdk import set_torch_rng_state, torch_rng_state

TRACKER_KEY = "megatron_cuda_tracker"


def megatron_rng_state() -> dict[str, Any]:
    """:func:`hfsdk.torch_rng_state` plus the tracker's states (``None`` off CUDA)."""
    state = torch_rng_state()
    state[TRACKER_KEY] = None
    if torch.cuda.is_available():
        from megatron.core.tensor_parallel.random import get_cuda_rng_tracker

        tracker = get_cuda_rng_tracker()
        state[TRACKER_KEY] = {name: s.clone() for name, s in tracker.get_states().items()}
    return state


def set_megatron_rng_state(state: Any) -> None:
    """Restore :func:`megatron_rng_state`'s result (or an older bare CPU state)."""
    set_torch_rng_state(state)
    tracker_states = state.get(TRACKER_KEY) if isinstance(state, dict) else None
    if tracker_states and torch.cuda.is_available():
        from megatron.core.tensor_parallel.random import get_cuda_rng_tracker

        get_cuda_rng_tracker().set_states(dict(tracker_states))
