"""The examples of docs/multimodal.md, run as written."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

from PIL import Image

DOC = Path(__file__).resolve().parents[3] / "docs" / "multimodal.md"


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_docs_example_runs_as_written() -> None:
    example, _ = _examples()
    namespace: dict[str, object] = {}
    exec(compile(example, str(DOC), "exec"), namespace)
    assert len(namespace["rewards"]) == 8


def test_the_docs_image_tool_returns_its_crop_through_the_tool_worker() -> None:
    from hfsdk_agents.tools import Tool, call_tool

    _, example = _examples()
    namespace: dict[str, object] = {"__name__": "docs_zoom"}
    exec(compile(example, str(DOC), "exec"), namespace)
    tool = Tool.from_function(namespace["zoom"])
    assert set(tool.parameters["properties"]) == {"x", "y"}
    out = asyncio.run(
        call_tool({"zoom": tool}, "zoom", {"x": 8, "y": 4}, timeout_s=10, max_output_chars=100)
    )
    assert (out.ok, out.content, len(out.images)) == (True, "zoomed at 8,4", 1)
    with Image.open(io.BytesIO(out.images[0])) as image:
        assert image.size == (56, 56) and image.getpixel((0, 0)) == (30, 30, 220)
