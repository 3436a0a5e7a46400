"""``assert_refused_in_one_line`` holds a command to the whole refusal contract."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hfsdk_testing import assert_refused_in_one_line, cli


def _refusing(make: Callable[[], None] = lambda: None) -> Callable[[list[str]], None]:
    """A fake ``hfsdk`` that calls ``make()``, then refuses with one ``Error:`` line, exit 2."""

    def main(args: list[str]) -> None:
        make()
        print("Error: bad input; expected good input; fix it", file=sys.stderr)
        raise SystemExit(2)

    return main


def test_a_clean_refusal_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_cli_main", _refusing)
    line = assert_refused_in_one_line(["run"], "bad input", capsys, root=tmp_path)
    assert line.startswith("Error: bad input")


def test_a_refusal_that_left_a_directory_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: only files were compared, so a run directory made before the refusal passed.
    monkeypatch.setattr(cli, "_cli_main", lambda: _refusing((tmp_path / "run").mkdir))
    with pytest.raises(AssertionError, match="made, written, changed"):
        assert_refused_in_one_line(["run"], "bad input", capsys, root=tmp_path)


def test_a_refusal_that_left_a_file_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_cli_main", lambda: _refusing((tmp_path / "x").touch))
    with pytest.raises(AssertionError, match="made, written, changed"):
        assert_refused_in_one_line(["run"], "bad input", capsys, root=tmp_path)
