"""No import cycles anywhere: core, the shared backend package and every plugin.

The graph has one node per module of ``hfsdk`` and of each package under
``plugins/`` and ``examples/``. An edge is any import that runs: module level or
inside a function (a function-level import only hides a cycle until the function
runs), but not under ``if TYPE_CHECKING:``. ``from hfsdk import Name`` and
``hfsdk.Name`` (an attribute of the imported facade) resolve ``Name`` through the
public surface's lazy table to the module that defines it: a lookup through the
facade runs that module's import as surely as a direct import does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import hfsdk

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = [ROOT, *ROOT.glob("plugins/*"), *ROOT.glob("examples/*")]


def _modules() -> dict[str, Path]:
    found = {}
    for base in PACKAGE_ROOTS:
        for package in sorted(base.glob("hfsdk*")):
            if not (package / "__init__.py").is_file():
                continue
            for path in package.rglob("*.py"):
                parts = list(path.relative_to(base).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                found[".".join(parts)] = path
    return found


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _edges(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    lazy: dict[str, str] = hfsdk._LAZY  # type: ignore[attr-defined]
    targets: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "hfsdk"
            and node.attr in lazy
        ):
            targets.add(lazy[node.attr])
        elif isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = _package_of(module, path).split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if base == "hfsdk" and alias.name in lazy:
                    targets.add(lazy[alias.name])
                elif f"{base}.{alias.name}" in modules:
                    targets.add(f"{base}.{alias.name}")
                else:
                    targets.add(base)
    return {t for t in targets if t in modules and t != module}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def test_there_are_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_graph_sees_real_edges() -> None:
    """Without these edges the check above would guard nothing."""
    graph = _graph()
    assert "hfsdk.core.registry" in graph["hfsdk.core.plugin_manager"]
    # ``from hfsdk import Batch`` in a plugin resolves to the defining module.
    assert "hfsdk.core.algorithm" in graph["hfsdk_grpo.grpo_algorithm"]
    # A function-level import counts.
    assert "hfsdk_backend_fsdp.fsdp_config" in graph["hfsdk_backend_fsdp.plugin"]


def test_a_planted_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_a_planted_facade_cycle_is_found(tmp_path: Path) -> None:
    """``hfsdk.get_registry(...)`` inside a function is an edge to the plugin manager; a
    module the plugin manager imports that looks the registry up that way is a cycle."""
    modules = _modules()
    planted = tmp_path / "planted.py"
    planted.write_text("import hfsdk\n\n\ndef tools():\n    return hfsdk.get_registry('tools')\n")
    modules["hfsdk.core.planted"] = planted
    graph = {name: _edges(name, path, modules) for name, path in modules.items()}
    assert "hfsdk.core.plugin_manager" in graph["hfsdk.core.planted"]
    graph["hfsdk.core.plugin_manager"].add("hfsdk.core.planted")
    cycles = _cycles(graph)
    assert any({"hfsdk.core.planted", "hfsdk.core.plugin_manager"} <= set(c) for c in cycles)
