"""The warm-start fit: seeded, and leaving torch's generators as they were."""

from __future__ import annotations

import pytest

from hfsdk_testing import RngForked, record_rng_forks


def test_the_seeded_fit_restores_the_cuda_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.manual_seed`` reseeds CUDA too: the fit forks the current CUDA device's
    generator as well as the CPU one, so it leaves both as they were."""
    import types

    from hfsdk_agents.warm_start import fit_token_distributions

    forked = record_rng_forks(monkeypatch)
    spec = types.SimpleNamespace(seed=3)
    with pytest.raises(RngForked):
        fit_token_distributions(spec, None, None, None, None)  # type: ignore[arg-type]
    assert forked == [[0]]
