"""Fixtures of the default-task tests: one full build and one quick build per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk_tasks import DefaultAssets, DefaultTaskSpec, ensure_default_assets

QUICK_SPEC = DefaultTaskSpec(
    hidden_size=16, num_heads=2, intermediate_size=32, num_layers=1, warm_start_steps=3
)
"""A spec that builds in well under a second (for cache behaviour, not learning)."""


@pytest.fixture(scope="session")
def default_assets(tmp_path_factory: pytest.TempPathFactory) -> DefaultAssets:
    """The real default task, built once into a private cache."""
    return ensure_default_assets(cache_dir=tmp_path_factory.mktemp("hfsdk-cache"))


@pytest.fixture
def quick_spec() -> DefaultTaskSpec:
    """:data:`QUICK_SPEC`."""
    return QUICK_SPEC


@pytest.fixture
def quick_cache(tmp_path: Path) -> Path:
    """An empty cache directory for one test."""
    return tmp_path / "cache"
