"""The adapter pool: a new adapter is seeded and leaves torch's generators as they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_a_rank_above_the_targeted_layers_sizes_is_refused(
    served: Any, service_client: Any
) -> None:
    """A LoRA rank beyond min(in, out) of a targeted layer adds no capacity, only memory (rank
    50000 grew the tiny model's server by ~1 GB): refused with one line before any allocation.

    The tiny model's smallest targeted layer is its LM head (128 -> vocab 26); without the head
    it is the attention projections (128 -> 128).
    """
    import tinker

    base = str(served.model_dir)
    with pytest.raises(
        tinker.RequestFailedError,
        match=r"LoRA rank 50000 is above 26, the smallest input or output size of the targeted "
        r"layers \(lm_head\)",
    ) as err:
        service_client.create_lora_training_client(base_model=base, rank=50000).result()
    assert "Traceback" not in str(err.value)
    with pytest.raises(tinker.RequestFailedError, match=r"LoRA rank 129 is above 128"):
        service_client.create_lora_training_client(
            base_model=base, rank=129, train_unembed=False
        ).result()
    # At the limit the adapter is created.
    full = service_client.create_lora_training_client(base_model=base, rank=26).result()
    assert full.get_info().lora_rank == 26
