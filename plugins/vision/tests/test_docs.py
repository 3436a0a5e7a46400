"""The example of docs/multimodal.md, run as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "multimodal.md"


def test_the_docs_example_runs_as_written() -> None:
    (example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    namespace: dict[str, object] = {}
    exec(compile(example, str(DOC), "exec"), namespace)
    assert len(namespace["rewards"]) == 8
