"""Which torch generators a seeded block forks, with a CUDA device faked (no GPU needed), and
the seeding contract of a policy worker's ``generate_sequences``."""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

import torch


class RngForked(Exception):
    """Raised by the recording ``fork_rng`` of :func:`record_rng_forks`: the seeded block
    itself need not run."""


def record_rng_forks(monkeypatch: Any) -> list[list[int]]:
    """With one CUDA device in use (faked), the devices each ``torch.random.fork_rng`` call
    forks; each call raises :class:`RngForked`. ``[[0]]``: the code forked the CUDA generator
    it reseeds with ``torch.manual_seed``; ``[[]]``: it left it reseeded."""
    forked: list[list[int]] = []

    def fork_rng(devices: Any, **_: Any) -> Any:
        forked.append(list(devices))
        raise RngForked

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.random, "fork_rng", fork_rng)
    return forked


def check_generation_seeding(monkeypatch: Any, module: ModuleType, worker_cls: type) -> None:
    """A policy worker's ``generate_sequences`` (``module.generate_rollout`` patched to draw
    once): without ``meta['sampling_seed']`` (training's calls) each call draws on from the
    worker's stream, nothing forked; with one (validation's) the draws repeat per seed and the
    worker's stream does not move (the CUDA generator forked too on a GPU)."""
    from hfsdk import Batch

    draws: list[float] = []

    def generate_rollout(rollout: Any, prompts: Batch) -> Batch:
        draws.append(float(torch.rand(())))
        return prompts

    class Rollout:
        collective = True  # megatron: every rank generates

    monkeypatch.setattr(module, "generate_rollout", generate_rollout)
    worker = worker_cls.__new__(worker_cls)  # rank 0 of 1, no engine built
    worker.rollout = Rollout()

    def prompts(seed: int | None) -> Batch:
        meta = {} if seed is None else {"sampling_seed": seed}
        return Batch.from_dict(tensors={"x": torch.zeros(2)}, meta=meta)

    torch.manual_seed(3)
    expected = [float(torch.rand(())) for _ in range(3)]
    torch.manual_seed(3)
    worker.generate_sequences(prompts(None))
    worker.generate_sequences(prompts(11))
    worker.generate_sequences(prompts(11))
    worker.generate_sequences(prompts(None))
    assert draws[0] == expected[0] and draws[3] == expected[1]  # seeded calls moved nothing
    assert draws[1] == draws[2] != expected[1]  # the same seed, the same draws
    with monkeypatch.context() as patched:
        forked = record_rng_forks(patched)
        worker.generate_sequences(prompts(None))
        assert forked == []
        with contextlib.suppress(RngForked):  # raised by the recording fork_rng
            worker.generate_sequences(prompts(11))
        assert forked == [[0]]
