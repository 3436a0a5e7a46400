"""scripts/config_reference.py: the committed docs/config_reference.md is current."""

from __future__ import annotations

import importlib.util
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest

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


def _generator(monkeypatch: pytest.MonkeyPatch, target: Path) -> ModuleType:
    """scripts/gen_config_docs.py loaded from its file, writing ``target`` instead of the docs."""
    # The script imports its sibling ``config_reference`` as a top-level module, as it runs.
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location(
        "_gen_config_docs_under_test", REPO / "scripts" / "gen_config_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "TARGET", target)
    # The real markdown is checked above; a stub keeps these tests about the writing.
    monkeypatch.setattr(module, "config_reference_markdown", lambda: "# reference\n")
    return module


def test_generator_writes_a_world_readable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mkstemp creates its file 0600 and os.replace keeps that mode on the committed docs.
    target = tmp_path / "config_reference.md"
    module = _generator(monkeypatch, target)
    monkeypatch.setattr(sys, "argv", ["gen_config_docs.py"])
    module.main()
    assert target.read_text() == "# reference\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert not list(tmp_path.glob("*.tmp"))


def test_generator_help_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "config_reference.md"
    module = _generator(monkeypatch, target)
    monkeypatch.setattr(sys, "argv", ["gen_config_docs.py", "--help"])
    with pytest.raises(SystemExit) as exited:
        module.main()
    assert exited.value.code == 0
    assert not target.exists()
