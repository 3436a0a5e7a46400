"""The adapter pool: a new adapter is seeded and leaves torch's generators as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk_testing import RngForked, record_rng_forks


def test_adding_an_adapter_restores_the_cuda_generator(
    default_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``torch.manual_seed`` reseeds CUDA too: adding an adapter forks the current CUDA
    device's generator as well as the CPU one, so it leaves both as they were."""
    from hfsdk_serve.adapters import AdapterPool, AdapterSpec

    pool = AdapterPool(default_model_dir)
    forked = record_rng_forks(monkeypatch)
    with pytest.raises(RngForked):
        pool.add("first", AdapterSpec(rank=4, seed=1))
    assert forked == [[0]]
