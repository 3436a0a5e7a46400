"""The allowed import directions between the core and the plugin distributions.

- The core (``hfsdk``) imports no plugin package, not even for type checking: it
  reaches features only through hooks and registries.
- The core's tests (``tests/``) import no plugin package either: they reach plugins
  by registered name, as a user's config does; a test of a plugin's code lives in
  that plugin's ``tests/`` and declares what it needs there. The one exception is a
  test-time library the root ``pyproject.toml`` declares as an optional dependency
  (``hfsdk-testing`` in ``dev``, as pytest ships ``pytester``): the core's tests may
  import it, the core never.
- A plugin distribution's code and tests import ``hfsdk``, their own package, and
  the packages of the distributions their ``pyproject.toml`` declares (as a
  dependency or an optional one), nothing else of this repository.

Every import counts: module level, inside functions, under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _requirement_name(text: str) -> str:
    return re.split(r"[\s\[<>=!~;]", text.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _distributions(root: Path) -> dict[str, tuple[str, set[str], Path]]:
    """distribution name -> (import package, declared distributions, plugin directory)."""
    found = {}
    for pyproject in sorted(root.glob("plugins/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        declared = {_requirement_name(r) for r in project.get("dependencies", [])}
        for extra in project.get("optional-dependencies", {}).values():
            declared |= {_requirement_name(r) for r in extra}
        packages = [
            p.name for p in pyproject.parent.glob("hfsdk_*") if (p / "__init__.py").exists()
        ]
        assert len(packages) == 1, (
            f"{pyproject.parent} holds {packages}; expected one hfsdk_* package"
        )
        found[project["name"].lower()] = (packages[0], declared, pyproject.parent)
    return found


def _test_distributions(root: Path) -> set[str]:
    """The distributions the root ``pyproject.toml`` declares as optional (test-time) ones."""
    pyproject = root / "pyproject.toml"
    if not pyproject.exists():
        return set()
    extras = tomllib.loads(pyproject.read_text())["project"].get("optional-dependencies", {})
    return {_requirement_name(r) for extra in extras.values() for r in extra}


def _imported_tops(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module.split(".")[0]


def layering_violations(root: Path) -> list[str]:
    """Every import that goes against the rules above, as ``file:line: what``."""
    dists = _distributions(root)
    package_of = {name: package for name, (package, _, _) in dists.items()}
    owner = {package: name for name, package in package_of.items()}
    problems = []
    for path in sorted((root / "hfsdk").rglob("*.py")):
        for line, top in _imported_tops(path):
            if top in owner:
                problems.append(
                    f"{path.relative_to(root)}:{line}: the core imports {top} ({owner[top]})"
                )
    for_tests = {package_of[d] for d in _test_distributions(root) if d in package_of}
    for path in sorted((root / "tests").rglob("*.py")):
        for line, top in _imported_tops(path):
            if top in owner and top not in for_tests:
                problems.append(
                    f"{path.relative_to(root)}:{line}: a core test imports {top} ({owner[top]}); "
                    "move it to that plugin's tests"
                )
    for name, (package, declared, directory) in dists.items():
        allowed = {"hfsdk", package} | {package_of[d] for d in declared if d in package_of}
        for path in sorted(directory.rglob("*.py")):
            for line, top in _imported_tops(path):
                if top in owner and top not in allowed:
                    problems.append(
                        f"{path.relative_to(root)}:{line}: {name} imports {top} without "
                        f"declaring {owner[top]} in its pyproject.toml"
                    )
    return problems


def test_imports_follow_the_layers() -> None:
    problems = layering_violations(ROOT)
    assert not problems, "\n".join(problems)


def _plugin(root: Path, name: str, deps: list[str], source: str) -> None:
    directory = root / "plugins" / name
    (directory / f"hfsdk_{name}").mkdir(parents=True)
    (directory / f"hfsdk_{name}" / "__init__.py").write_text(source)
    requirements = ", ".join(f'"{d}"' for d in deps)
    (directory / "pyproject.toml").write_text(
        f'[project]\nname = "hfsdk-plugin-{name}"\ndependencies = [{requirements}]\n'
    )


def test_planted_violations_are_found(tmp_path: Path) -> None:
    (tmp_path / "hfsdk" / "core").mkdir(parents=True)
    (tmp_path / "hfsdk" / "core" / "loop.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from hfsdk_a import x\n"
    )
    (tmp_path / "tests" / "core").mkdir(parents=True)
    (tmp_path / "tests" / "core" / "test_x.py").write_text(
        "from hfsdk_t import FakeRun\ndef test():\n    import hfsdk_a.y\n"
    )
    (tmp_path / "hfsdk" / "core" / "helpers.py").write_text("import hfsdk_t\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "hfsdk"\n[project.optional-dependencies]\n'
        'dev = ["pytest>=8", "hfsdk-plugin-t==0.1.0"]\n'
    )
    _plugin(tmp_path, "t", ["hfsdk"], "import hfsdk\n")
    _plugin(tmp_path, "a", ["hfsdk"], "import hfsdk\n")
    _plugin(tmp_path, "b", ["hfsdk", "hfsdk-plugin-a"], "def f():\n    import hfsdk_a\n")
    _plugin(tmp_path, "c", ["hfsdk"], "from hfsdk_b.sub import y\n")
    # the core's tests may import the test-time library the root declares (hfsdk_t), the
    # core may not
    assert layering_violations(tmp_path) == [
        "hfsdk/core/helpers.py:1: the core imports hfsdk_t (hfsdk-plugin-t)",
        "hfsdk/core/loop.py:3: the core imports hfsdk_a (hfsdk-plugin-a)",
        "tests/core/test_x.py:3: a core test imports hfsdk_a (hfsdk-plugin-a); "
        "move it to that plugin's tests",
        "plugins/c/hfsdk_c/__init__.py:1: hfsdk-plugin-c imports hfsdk_b without declaring "
        "hfsdk-plugin-b in its pyproject.toml",
    ]
