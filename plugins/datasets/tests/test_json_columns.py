"""The check that a ``Json`` column reads back as the json/jsonl file holds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk_datasets import load_prompt_dataset

ROWS = '{"prompt": "a", "answer": "007"}, {"prompt": "b", "answer": 7}'


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
@pytest.mark.parametrize("layout", ["one line", "pretty"])
def test_a_json_array_is_checked_whatever_the_file_is_called(
    tmp_path: Path, suffix: str, layout: str
) -> None:
    # The layout comes from the content: a .jsonl holding an array was read line by line (a
    # raw JSONDecodeError when pretty-printed, no check at all on one line: "007" became 7).
    text = f"[{ROWS}]" if layout == "one line" else "[\n  " + ROWS.replace("}, ", "},\n  ") + "\n]"
    path = tmp_path / f"rows{suffix}"
    path.write_text(text)
    with pytest.raises(HfsdkError, match=r"row 0's '007' reads back as 7; give the column"):
        load_prompt_dataset([str(path)], "prompt")


def test_rows_of_one_type_pass_in_either_layout(tmp_path: Path) -> None:
    array = tmp_path / "a.jsonl"
    array.write_text('[\n {"prompt": "a", "answer": {"x": 1}},\n {"prompt": "b", "answer": 2}\n]')
    lines = tmp_path / "l.json"
    lines.write_text('{"prompt": "a", "answer": "x"}\n{"prompt": "b", "answer": "y"}\n')
    assert load_prompt_dataset([str(lines)], "prompt")["answer"] == ["x", "y"]
    assert load_prompt_dataset([str(array)], "prompt")["answer"] == [{"x": 1}, 2]
