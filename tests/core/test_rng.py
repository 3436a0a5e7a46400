"""RNG checkpoints: CPU and CUDA generators saved together, old CPU-only states still load."""

from __future__ import annotations

import pytest
import torch

from hfsdk.core import rng


def test_cpu_state_round_trips_and_the_old_format_loads() -> None:
    state = rng.torch_rng_state()
    expected = torch.rand(3)
    rng.set_torch_rng_state(state)
    assert torch.equal(torch.rand(3), expected)
    rng.set_torch_rng_state(state["cpu"])  # a bare tensor, as older checkpoints hold
    assert torch.equal(torch.rand(3), expected)


def test_cuda_states_are_saved_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    restored = []
    fake = [torch.tensor([1], dtype=torch.uint8), torch.tensor([2], dtype=torch.uint8)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: fake)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    state = rng.torch_rng_state()
    assert state["cuda"] is fake
    rng.set_torch_rng_state(state)
    assert restored == [fake]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # another machine: warn, skip
    rng.set_torch_rng_state(state)
    assert restored == [fake]
