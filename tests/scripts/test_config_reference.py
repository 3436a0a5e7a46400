"""scripts/config_reference.py: the committed docs/config_reference.md is current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "config_reference.md"


def test_docs_match_the_metadata() -> None:
    # A script's module, not a package's: loaded from its file as the script runs it.
    spec = importlib.util.spec_from_file_location(
        "_config_reference_under_test", REPO / "scripts" / "config_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DOCS.read_text() == module.config_reference_markdown(), (
        "docs/config_reference.md is stale; run: python scripts/gen_config_docs.py"
    )
