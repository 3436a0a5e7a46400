"""The public surface: every lazy name resolves, editors see the same names, plugins use only it."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import hfsdk

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_SOURCES = sorted(
    [*ROOT.glob("plugins/*/hfsdk_*/*.py"), *ROOT.glob("examples/*/hfsdk_*/*.py")]
)


def test_every_public_name_resolves() -> None:
    for name in hfsdk.__all__:
        assert getattr(hfsdk, name) is not None, name


def test_type_checking_imports_name_the_same_things() -> None:
    tree = ast.parse((ROOT / "hfsdk" / "__init__.py").read_text())
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
    )
    typed = {
        a.asname or a.name
        for n in ast.walk(block)
        if isinstance(n, ast.ImportFrom)
        for a in n.names
    }
    assert typed == set(hfsdk.__all__) - {"__version__", "hookimpl"}


def test_old_protocol_name_still_works_but_warns() -> None:
    with pytest.warns(DeprecationWarning, match="BuiltinProtocol"):
        assert hfsdk.Protocol is hfsdk.BuiltinProtocol  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hfsdk.BuiltinProtocol.DP_COMPUTE_PROTO == "dp_compute_proto"


@pytest.mark.parametrize("path", PLUGIN_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_import_only_the_public_surface(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        modules = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            assert not (module.startswith("hfsdk.") or module == "hfsdk.core"), (
                f"{path.relative_to(ROOT)} imports {module}; import it from hfsdk instead"
            )
