"""Checkpoint retention: the last keep_last, plus the best by a validation metric."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from hfsdk.core.trainer import retention
from hfsdk.core.trainer.checkpoint import clean_partial, complete_checkpoints, write_checkpoint
from hfsdk.core.trainer.retention import best_step, prune_checkpoints


def _checkpoints(run_dir: Path, steps: list[int]) -> None:
    for step in steps:
        write_checkpoint(run_dir, step, lambda d, s=step: (d / "w.txt").write_text(str(s)))


def _kept(run_dir: Path) -> list[int]:
    return sorted(step for step, _ in complete_checkpoints(run_dir))


def test_keeps_the_last_ones_and_the_best(tmp_path: Path) -> None:
    _checkpoints(tmp_path, [2, 4, 6, 8, 10])
    rows = [{"step": s, "val/pass@1": v} for s, v in [(2, 0.1), (4, 0.7), (6, 0.3), (8, 0.2)]]
    rows.append({"step": 10, "reward/mean": 0.5})  # no validation at 10
    removed = prune_checkpoints(tmp_path, rows, keep_last=2, keep_best="val/pass@1", step=10)
    assert removed == [2, 6]
    assert _kept(tmp_path) == [4, 8, 10]
    assert (tmp_path / "checkpoints" / "step_4" / "w.txt").read_text() == "4"


def test_zero_keeps_everything_and_no_metric_keeps_only_the_last(tmp_path: Path) -> None:
    _checkpoints(tmp_path, [1, 2, 3])
    assert prune_checkpoints(tmp_path, [], keep_last=0, keep_best="val/pass@1", step=3) == []
    assert prune_checkpoints(tmp_path, [], keep_last=1, keep_best="val/pass@1", step=3) == [1, 2]
    assert _kept(tmp_path) == [3]


def test_a_removal_cut_short_is_never_mistaken_for_a_checkpoint(tmp_path: Path) -> None:
    _checkpoints(tmp_path, [1, 2])
    victim = tmp_path / "checkpoints" / "step_1"
    doomed = victim.rename(victim.with_name(".step_1.tmp-999"))  # what a removal does first
    assert _kept(tmp_path) == [2]
    (doomed / "w.txt").unlink()  # ... then deleting; killed here
    assert clean_partial(tmp_path) == ["removed .step_1.tmp-999"]
    assert not doomed.exists() and _kept(tmp_path) == [2]


def test_a_prune_killed_before_deleting_does_not_bring_the_checkpoint_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between the removal's rename and its delete: the renamed copy still held its
    COMPLETE marker, so the next start's clean_partial republished the pruned step."""
    _checkpoints(tmp_path, [1, 2])
    # The kill: retention's delete never runs (its own shutil only; clean_partial's deletes).
    monkeypatch.setattr(retention, "shutil", types.SimpleNamespace(rmtree=lambda *a, **k: None))
    assert prune_checkpoints(tmp_path, [], keep_last=1, keep_best=None, step=2) == [1]
    assert _kept(tmp_path) == [2]
    assert clean_partial(tmp_path) == [f"removed .step_1.tmp-{os.getpid()}"]
    assert _kept(tmp_path) == [2]
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_2"]


def test_the_checkpoint_just_written_is_kept_beside_later_ones(tmp_path: Path) -> None:
    """A run resumed from step 1 (step 2 and 3 damaged) wrote step 2 again: keep_last=1
    counted step 3 and removed steps 1 and 2, keeping only the damaged one."""
    _checkpoints(tmp_path, [1, 2, 3])
    assert prune_checkpoints(tmp_path, [], keep_last=1, keep_best=None, step=2) == [1]
    assert _kept(tmp_path) == [2, 3]  # the later one is left as it is


def test_best_step_prefers_the_earliest_of_equal_values() -> None:
    rows = [{"step": 1, "m": 0.5}, {"step": 2, "m": 0.5}, {"step": 3, "m": "nan-text"}]
    assert best_step(rows, "m", {1, 2, 3}) == 1
    assert best_step(rows, "m", {3}) is None


def test_a_nan_metric_is_never_the_best() -> None:
    # read_metrics gives the log's null back as NaN; NaN > x is never true, so a NaN first
    # row would otherwise have stayed "best".
    rows = [{"step": 1, "m": float("nan")}, {"step": 2, "m": 0.1}, {"step": 3, "m": None}]
    assert best_step(rows, "m", {1, 2, 3}) == 2
