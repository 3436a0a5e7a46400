"""``hfsdk reward score``: one JSON object per row, from any registered function and its config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk.core.cli.main import main


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def _rows(tmp_path: Path, rows: list[dict]) -> str:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_function_with_its_own_columns(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _rows(
        tmp_path,
        [
            {"prompt": "2+2", "response": "The answer is 4", "answer": "4"},
            {"prompt": "2+3", "response": "The answer is 6", "answer": "5"},
        ],
    )
    code, out, err = _hfsdk(capsys, "reward", "score", "exact_match", "--data", path)
    assert code == 0, err
    assert [json.loads(line)["score"] for line in out.splitlines()] == [1.0, 0.0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json}\n", "line 1 is not JSON"),
        ('{"prompt": "p"}\n', "line 1 has no 'response' string"),
        ("", "holds no rows"),
    ],
)
def test_bad_rows_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(content)
    code, _, err = _hfsdk(capsys, "reward", "score", "exact_match", "--data", str(path))
    assert code == 2 and err.count("\n") == 1 and expected in err
