"""Shared fixtures for the core tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hfsdk_testing.fixtures import fresh_plugin_manager  # noqa: F401  (autouse)


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
