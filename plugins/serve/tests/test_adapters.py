"""The adapter pool: a new adapter is seeded and leaves torch's generators as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


class _Forked(Exception):
    """Raised by the recording ``fork_rng``: the seeded block itself need not run."""


def _record_forks(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """With one CUDA device visible (faked), the devices each ``fork_rng`` call forks."""
    forked: list[list[int]] = []

    def fork_rng(devices, **_):
        forked.append(list(devices))
        raise _Forked

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.random, "fork_rng", fork_rng)
    return forked


def test_adding_an_adapter_restores_the_cuda_generator(
    default_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``torch.manual_seed`` reseeds CUDA too: adding an adapter forks the current CUDA
    device's generator as well as the CPU one, so it leaves both as they were."""
    from hfsdk_serve.adapters import AdapterPool, AdapterSpec

    pool = AdapterPool(default_model_dir)
    forked = _record_forks(monkeypatch)
    with pytest.raises(_Forked):
        pool.add("first", AdapterSpec(rank=4, seed=1))
    assert forked == [[0]]
