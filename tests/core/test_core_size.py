"""The core stays a host: at most 15,000 lines of Python (features land as plugins)."""

from __future__ import annotations

from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "hfsdk"
LIMIT = 15_000


def test_the_core_is_at_most_15000_lines() -> None:
    # What `find hfsdk -name '*.py' | xargs cat | wc -l` counts (docs/architecture.md).
    lines = sum(len(path.read_bytes().splitlines()) for path in CORE.rglob("*.py"))
    assert lines <= LIMIT, (
        f"hfsdk/ holds {lines} lines of Python, over {LIMIT}: a feature belongs in a plugin "
        "(docs/architecture.md, docs/plugin_hooks.md)"
    )
