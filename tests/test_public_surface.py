"""The public surface: every lazy name resolves, editors see the same names, plugins use only it."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import hfsdk

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_SOURCES = sorted(
    [*ROOT.glob("plugins/*/hfsdk_*/**/*.py"), *ROOT.glob("examples/*/hfsdk_*/**/*.py")]
)


def _distributions() -> dict[str, tuple[str, set[str]]]:
    """Import package -> (distribution name, distributions it declares it depends on)."""
    import re
    import tomllib

    out = {}
    for pyproject in [
        *ROOT.glob("plugins/*/pyproject.toml"),
        *ROOT.glob("examples/*/pyproject.toml"),
    ]:
        project = tomllib.loads(pyproject.read_text())["project"]
        deps = {re.split(r"[=<>!~\[ ;]", d, maxsplit=1)[0] for d in project.get("dependencies", [])}
        for package in pyproject.parent.glob("hfsdk_*"):
            if (package / "__init__.py").is_file():
                out[package.name] = (project["name"], deps)
    return out


DISTRIBUTIONS = _distributions()


def test_every_public_name_resolves_to_what_its_module_defines() -> None:
    import importlib

    lazy = hfsdk._LAZY  # type: ignore[attr-defined]
    for name in hfsdk.__all__:
        if name in ("__version__", "hookimpl"):
            continue
        assert getattr(hfsdk, name) is getattr(importlib.import_module(lazy[name]), name), name


def test_the_public_names_are_the_type_checking_imports_each_once() -> None:
    tree = ast.parse((ROOT / "hfsdk" / "__init__.py").read_text())
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
    )
    typed = [a.name for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names]
    assert len(typed) == len(set(typed)), "a public name is imported twice"
    assert set(typed) == set(hfsdk.__all__) - {"__version__", "hookimpl"}
    assert "Batch" in dir(hfsdk)


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


def _imported_modules(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(a.name for a in node.names)
    return modules


@pytest.mark.parametrize("path", PLUGIN_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_import_only_plugins_they_declare(path: Path) -> None:
    """A plugin imports another plugin's package only if its pyproject depends on it."""
    own = path.relative_to(ROOT).parts[2]
    _, declared = DISTRIBUTIONS[own]
    for module in _imported_modules(path):
        package = module.split(".")[0]
        if package == own or package not in DISTRIBUTIONS:
            continue
        distribution, _ = DISTRIBUTIONS[package]
        assert distribution in declared, (
            f"{path.relative_to(ROOT)} imports {module} from {distribution}, which "
            f"{DISTRIBUTIONS[own][0]} does not declare; move what they share into "
            "hfsdk_backend_common or declare the dependency"
        )


BACKENDS = {"hfsdk_backend_fsdp", "hfsdk_backend_megatron", "hfsdk_rollout_vllm"}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_backends_never_import_a_sibling_backend(backend: str) -> None:
    """What backends share lives in hfsdk_backend_common, not in one of them."""
    for path in sorted((ROOT / "plugins").glob(f"*/{backend}/**/*.py")):
        for module in _imported_modules(path):
            package = module.split(".")[0]
            assert package == backend or package not in BACKENDS, (
                f"{path.relative_to(ROOT)} imports {module}"
            )
        _, declared = DISTRIBUTIONS[backend]
        assert not {DISTRIBUTIONS[b][0] for b in BACKENDS - {backend}} & declared


def test_the_import_checks_see_real_imports() -> None:
    """Without these the checks above would pass on anything."""
    safe = ROOT / "plugins" / "safe_rlhf" / "hfsdk_safe_rlhf" / "spec.py"
    assert "hfsdk_ppo.spec" in _imported_modules(safe)
    assert DISTRIBUTIONS["hfsdk_safe_rlhf"][0] == "hfsdk-plugin-safe-rlhf"
    assert "hfsdk-plugin-ppo" in DISTRIBUTIONS["hfsdk_safe_rlhf"][1]
    assert any("hfsdk_backend_common" in p.parts for p in PLUGIN_SOURCES)
