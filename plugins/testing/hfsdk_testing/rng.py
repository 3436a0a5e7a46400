"""Which torch generators a seeded block forks, with a CUDA device faked (no GPU needed)."""

from __future__ import annotations

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
