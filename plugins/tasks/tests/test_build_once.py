"""``build_once``: a cached directory is complete or absent, whoever builds it and however it
ends."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from transformers.utils import logging as hf_logging

from hfsdk_tasks import build_once, holds


def _write(marker: str = "info.json", text: str = "ours"):
    calls: list[Path] = []

    def build(staging: Path) -> None:
        calls.append(staging)
        (staging / "weights.bin").write_text(text)
        (staging / marker).write_text("{}")

    return build, calls


def test_builds_once_then_reads_the_cache(tmp_path: Path) -> None:
    build, calls = _write()
    final = tmp_path / "kind" / "key"
    assert build_once(final, build, complete=holds("info.json")) == final
    assert build_once(final, build, complete=holds("info.json")) == final
    assert len(calls) == 1
    assert calls[0].parent == final.parent and calls[0] != final  # built beside it, then renamed
    assert (final / "weights.bin").read_text() == "ours"
    assert [p.name for p in final.parent.iterdir()] == ["key"]


def test_a_failed_build_leaves_nothing_and_raises(tmp_path: Path) -> None:
    def build(staging: Path) -> None:
        (staging / "weights.bin").write_text("half")
        raise RuntimeError("disk full")

    final = tmp_path / "key"
    with pytest.raises(RuntimeError, match="disk full"):
        build_once(final, build, complete=holds("info.json"))
    assert list(tmp_path.iterdir()) == []


def test_an_incomplete_directory_is_not_taken_for_a_build(tmp_path: Path) -> None:
    final = tmp_path / "key"
    final.mkdir()
    (final / "weights.bin").write_text("left by a crash")  # no marker
    build, _ = _write()
    # The rename onto a non-empty directory fails, and what is there is not complete.
    with pytest.raises(OSError):
        build_once(final, build, complete=holds("info.json"))
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


def test_losing_the_race_keeps_the_winners_build(tmp_path: Path) -> None:
    final = tmp_path / "key"

    def build(staging: Path) -> None:
        (staging / "info.json").write_text("{}")
        final.mkdir()  # another process renames its finished build into place first
        (final / "info.json").write_text('{"winner": true}')

    assert build_once(final, build, complete=holds("info.json")) == final
    assert (final / "info.json").read_text() == '{"winner": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


def test_progress_bars_are_hidden_while_building_and_restored(tmp_path: Path) -> None:
    seen: list[tuple[bool, bool]] = []

    def build(staging: Path) -> None:
        seen.append((hf_logging.is_progress_bar_enabled(), datasets.is_progress_bar_enabled()))
        (staging / "info.json").write_text("{}")

    hf_logging.enable_progress_bar()
    datasets.enable_progress_bars()
    build_once(tmp_path / "key", build, complete=holds("info.json"))
    assert seen == [(False, False)]
    assert hf_logging.is_progress_bar_enabled() and datasets.is_progress_bar_enabled()
