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


def _distributions() -> dict[str, tuple[str, set[str]]]:
    """Each plugin package's (distribution name, declared dependencies)."""
    import re
    import tomllib

    found = {}
    for pyproject in ROOT.glob("plugins/*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text())["project"]
        deps = {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0] for d in project.get("dependencies", [])}
        for package in pyproject.parent.glob("hfsdk_*/__init__.py"):
            found[package.parent.name] = (project["name"], deps)
    return found


def test_plugins_import_no_other_plugin_they_do_not_declare() -> None:
    """A plugin package imports another only if its pyproject depends on that distribution."""
    packages = _distributions()
    undeclared = []
    for own, (_, deps) in packages.items():
        for path in (ROOT / "plugins").glob(f"*/{own}/**/*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                for name in names:
                    top = name.split(".")[0]
                    if top in packages and top != own and packages[top][0] not in deps:
                        undeclared.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not undeclared, "\n".join(sorted(set(undeclared)))
