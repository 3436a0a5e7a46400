"""The warm-start fit: seeded, and leaving torch's generators as they were."""

from __future__ import annotations

from pathlib import Path

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


def test_a_cached_build_missing_a_file_is_removed_and_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``info.json`` alone marked a build complete, so a cache without its weights
    was returned and the run crashed later in a worker."""
    from hfsdk_agents.warm_start import cached_build

    monkeypatch.setenv("HFSDK_CACHE_DIR", str(tmp_path))
    files = [  # what the tool_use, frozen_lake and reasoning_gym builds write
        "info.json", "model/config.json", "model/model.safetensors", "model/tokenizer.json",
        "train.jsonl", "val.jsonl",
    ]  # fmt: skip
    builds = []

    def build(staging: Path) -> None:
        builds.append(staging)
        for name in files:
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_text(f"build {len(builds)}")

    root = cached_build("fake_task", "k", build)
    assert cached_build("fake_task", "k", build) == root and len(builds) == 1
    (root / "model" / "model.safetensors").unlink()
    assert cached_build("fake_task", "k", build) == root
    assert len(builds) == 2
    assert (root / "model" / "model.safetensors").read_text() == "build 2"
