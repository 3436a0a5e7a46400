"""Two import cycles that once existed stay gone (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "hfsdk" / "core"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


@pytest.mark.parametrize(
    ("module", "must_not_import"),
    [
        ("registry.py", "hfsdk.core.plugin_manager"),  # the plugin manager imports the registry
        ("maths/aggregation.py", "hfsdk.core.algorithm"),  # the algorithm imports aggregation
        ("algorithm_spec.py", "hfsdk.core.algorithm"),
    ],
)
def test_no_cycle(module: str, must_not_import: str) -> None:
    assert must_not_import not in _imports(CORE / module)


def test_the_reverse_edges_exist() -> None:
    """Without these edges the checks above would guard nothing."""
    assert "hfsdk.core.registry" in _imports(CORE / "plugin_manager.py")
    assert "hfsdk.core.maths.aggregation" in _imports(CORE / "algorithm.py")
