"""The docs' FakeRun examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import hfsdk_testing

ROOT = Path(__file__).resolve().parents[3]


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_algorithms_doc_fake_run_example_runs() -> None:
    blocks = [
        b
        for b in _python_blocks((ROOT / "docs" / "algorithms.md").read_text())
        if "from hfsdk_testing import FakeRun" in b
    ]
    assert len(blocks) == 1
    scope: dict = {}
    exec(blocks[0], scope)  # its asserts check the order of calls and the reward metric
    assert "advantages" in scope["batch"]


def test_the_package_docstring_example_runs() -> None:
    example = hfsdk_testing.__doc__.split("    from hfsdk_testing import FakeRun", 1)[1]
    code = "from hfsdk_testing import FakeRun" + "\n".join(
        line[4:] for line in example.splitlines()
    )
    scope: dict = {}
    exec(code, scope)
    assert scope["metrics"]["reward/mean"] == 0.5
