"""Shared fixtures for the core tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfsdk.core.plugin_manager import reset_plugin_manager


@pytest.fixture(autouse=True)
def _fresh_plugin_manager(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test sees a plugin manager built from its own environment."""
    for var in ("HFSDK_LOAD_PLUGINS", "HFSDK_DISABLE_PLUGINS", "HFSDK_TRACE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


def make_distribution(root: Path, dist: str, entry_name: str, module: str, source: str) -> None:
    """Write an importable module plus a ``.dist-info`` with an ``hfsdk`` entry point.

    ``importlib.metadata`` finds it on ``sys.path`` exactly like a pip-installed
    distribution, so plugin discovery is exercised for real.
    """
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[hfsdk]\n{entry_name} = {module}\n")


def run_python(code: str, *, path: Path | None = None, env: dict[str, str] | None = None):
    """Run ``code`` in a fresh interpreter (optionally with ``path`` on PYTHONPATH)."""
    full_env = {**os.environ, **(env or {})}
    if path is not None:
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(path), full_env.get("PYTHONPATH", "")) if p
        )
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


@pytest.fixture(scope="session")
def tp2_tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A tiny Llama whose 4 heads / 2 key-value heads tp = 2 divides (peaked logits) and the
    default task's tokenizer: ``(model path, tokenizer)``, built once per session."""
    from hfsdk import default_task_assets, load_tokenizer
    from hfsdk.testing import save_tiny_llama

    root = tmp_path_factory.mktemp("tp2_llama")
    # The default task's tokenizer (its words; the model below is this fixture's own).
    tokenizer = load_tokenizer(default_task_assets().tokenizer_dir)
    path = save_tiny_llama(
        root / "model", tokenizer, hidden_size=64, intermediate_size=64, num_heads=4,
        num_kv_heads=2, init_std=0.2,
    )  # fmt: skip
    return path, tokenizer


@pytest.fixture
def sandbox_any_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox plugin's fixture, for the core tests of code that runs model programs."""
    from hfsdk_sandbox.bwrap import unavailable_reason
    from hfsdk_sandbox.runner import ISOLATION_ENV

    if unavailable_reason() is not None:
        monkeypatch.setenv(ISOLATION_ENV, "process")
