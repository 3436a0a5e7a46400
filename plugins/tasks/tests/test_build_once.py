"""``build_once``: a cached directory is complete or absent, whoever builds it and however it
ends."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import stat
import time
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


def test_a_damaged_directory_is_removed_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    final = tmp_path / "key"
    final.mkdir()
    (final / "weights.bin").write_text("a build whose marker was deleted")
    build, calls = _write()
    with caplog.at_level(logging.WARNING, logger="hfsdk_tasks.build_once"):
        assert build_once(final, build, complete=holds("info.json")) == final
    assert len(calls) == 1 and (final / "weights.bin").read_text() == "ours"
    assert "is incomplete; rebuilding it" in caplog.text
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


def test_a_build_completed_while_judging_a_damaged_one_is_kept(tmp_path: Path) -> None:
    final = tmp_path / "key"
    final.mkdir()
    (final / "weights.bin").write_text("damaged")
    seen: list[bool] = []

    def complete(directory: Path) -> bool:
        done = (directory / "info.json").is_file()
        if not seen:  # meanwhile another process removes the damaged build and renames its own in
            shutil.rmtree(final)
            final.mkdir()
            (final / "info.json").write_text('{"winner": true}')
        seen.append(done)
        return done

    build, calls = _write()
    assert build_once(final, build, complete=complete) == final
    assert calls == [] and (final / "info.json").read_text() == '{"winner": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


def test_a_build_renamed_in_after_the_last_check_is_put_back_not_deleted(tmp_path: Path) -> None:
    final = tmp_path / "key"
    final.mkdir()
    (final / "info.json").write_text('{"winner": true}')
    checks: list[Path] = []

    def complete(directory: Path) -> bool:
        checks.append(directory)
        # The first two checks ran before the other process renamed its build in.
        return len(checks) > 2 and (directory / "info.json").is_file()

    build, calls = _write()
    assert build_once(final, build, complete=complete) == final
    assert calls == [] and (final / "info.json").read_text() == '{"winner": true}'
    assert checks[2].name.startswith(".key.damaged-")  # judged once moved aside, then put back
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_the_directory_gets_the_umasks_mode_not_owner_only(tmp_path: Path, umask: int) -> None:
    # A cache shared between users (HFSDK_CACHE_DIR) needs the usual 0755 directories.
    build, _ = _write()
    old = os.umask(umask)
    try:
        build_once(tmp_path / "key", build, complete=holds("info.json"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o777 & ~umask


def test_staging_left_by_a_killed_build_is_removed_but_not_one_being_written(
    tmp_path: Path,
) -> None:
    hours_ago = time.time() - 2 * 3600

    def staging(suffix: str, *, old: bool) -> Path:
        directory = tmp_path / f".key.building-{suffix}"
        (directory / "model").mkdir(parents=True)
        (directory / "model" / "weights.bin").write_text("half")
        if old:
            for path in (directory / "model" / "weights.bin", directory / "model", directory):
                os.utime(path, (hours_ago, hours_ago))
        return directory

    killed = staging("killed", old=True)
    recent = staging("recent", old=False)
    slow = staging("slow", old=True)  # a long build, still running: it holds its lock
    other = tmp_path / ".other.building-killed"  # another key's: not ours to judge
    other.mkdir()
    os.utime(other, (hours_ago, hours_ago))
    fd = os.open(slow, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        build, _ = _write()
        build_once(tmp_path / "key", build, complete=holds("info.json"))
    finally:
        os.close(fd)
    assert not killed.exists()
    assert recent.exists() and slow.exists() and other.exists()


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
