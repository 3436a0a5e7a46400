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


def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """One visible CUDA device whose generator calls are recorded (no GPU needed)."""
    calls: list[tuple] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: False)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda s: calls.append(("seed", s)))
    monkeypatch.setattr(
        torch.cuda,
        "get_rng_state",
        lambda device="cuda": calls.append(("get", device)) or torch.tensor([7], dtype=torch.uint8),
    )
    monkeypatch.setattr(
        torch.cuda,
        "set_rng_state",
        lambda state, device="cuda": calls.append(("set", int(state[0]), device)),
    )
    return calls


def test_a_seeded_block_restores_the_cpu_and_the_cuda_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``torch.manual_seed`` reseeds CUDA too: the current device's generator is restored after
    the block, so later unseeded sampling does not depend on the block's seed."""
    calls = fake_cuda(monkeypatch)
    before = torch.get_rng_state()
    with rng.seeded_rng(1234):
        inside = torch.rand(2)
    assert torch.equal(torch.get_rng_state(), before)
    assert calls == [("get", 0), ("seed", 1234), ("set", 7, 0)]
    with rng.seeded_rng(1234):
        assert torch.equal(torch.rand(2), inside)
    calls.clear()
    with rng.seeded_rng(None):  # unseeded: generators forked, none seeded
        pass
    assert calls == [("get", 0), ("set", 7, 0)]
    # CUDA visible but not in use: neither forked (that would start it) nor seeded (a lazy
    # seed would outlive the block); the CPU generator alone is seeded and restored.
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    calls.clear()
    with rng.seeded_rng(1234):
        assert torch.equal(torch.rand(2), inside)
    assert calls == [] and torch.equal(torch.get_rng_state(), before)


def test_a_seeded_request_restores_the_cuda_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default ``generate_request`` body seeds a request's row and restores the CUDA
    generator after it, as well as the CPU one."""
    import types

    from hfsdk.core.batch import Batch
    from hfsdk.core.generation_requests import GenerationRequest
    from hfsdk.core.rollout_contract import RolloutBackend

    calls = fake_cuda(monkeypatch)

    def generate_sequences(prompts: Batch) -> Batch:
        calls.append(("generate",))
        return Batch.from_dict(
            tensors={"responses": torch.tensor([[5, 2]]), "response_mask": torch.tensor([[1, 1]])}
        )

    actor = types.SimpleNamespace(
        generation_eos_ids=[2], tokenizer=types.SimpleNamespace(eos_token_id=2)
    )
    rollout = types.SimpleNamespace(generate_sequences=generate_sequences, actor=actor)
    request = GenerationRequest(prompt_ids=[1, 3], max_new_tokens=2, seed=1234)
    result = RolloutBackend._serve_one_row(rollout, request)  # type: ignore[arg-type]
    assert result.token_ids == (5, 2)
    assert calls == [("get", 0), ("seed", 1234), ("generate",), ("set", 7, 0)]
