"""The warm-start fit: seeded, and leaving torch's generators as they were."""

from __future__ import annotations

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


def test_the_seeded_fit_restores_the_cuda_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.manual_seed`` reseeds CUDA too: the fit forks the current CUDA device's
    generator as well as the CPU one, so it leaves both as they were."""
    import types

    from hfsdk_agents.warm_start import fit_token_distributions

    forked = _record_forks(monkeypatch)
    spec = types.SimpleNamespace(seed=3)
    with pytest.raises(_Forked):
        fit_token_distributions(spec, None, None, None, None)  # type: ignore[arg-type]
    assert forked == [[0]]
