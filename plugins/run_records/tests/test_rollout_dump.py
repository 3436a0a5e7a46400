"""``trainer.rollout_dump``: one JSON line per sample, written atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import Batch
from hfsdk_run_records.rollout_dump import write_rollout_dump


def test_dump_has_the_samples_rewards_token_counts_and_segments(tmp_path: Path) -> None:
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    attention = torch.tensor([[1, 1, 1, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0, 0]])
    scores = torch.zeros(2, 5)
    scores[0, 3] = 1.0
    segments = [{"role": "assistant", "text": "a", "tokens": 2}, {"role": "tool", "tokens": 1}]
    batch = Batch.from_dict(
        tensors={"response_mask": mask, "attention_mask": attention, "token_level_scores": scores},
        non_tensors={
            "uid": [7, 8],
            "raw_prompt": ["p0", "p1"],
            "response_text": ["r0", "r1"],
            "agent_trajectory": [{"finish": "stop", "segments": segments}, {"finish": "stop"}],
        },
    )
    path = write_rollout_dump(tmp_path, 3, batch)
    assert path == tmp_path / "rollouts" / "step_3.jsonl"
    assert sorted(p.name for p in path.parent.iterdir()) == ["step_3.jsonl"]  # no temp left
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first == {
        "uid": 7,
        "raw_prompt": "p0",
        "response_text": "r0",
        "reward": 1.0,
        "response_tokens": 4,
        "trained_tokens": 3,
        "trajectory": {"finish": "stop", "segments": segments},
    }
    assert (second["reward"], second["response_tokens"], second["trained_tokens"]) == (0.0, 1, 1)


def test_the_dump_goes_through_the_atomic_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temp file fsynced, renamed, then its directory fsynced (``hfsdk.write_text_atomic``)."""
    import os

    from hfsdk.core import atomic

    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    batch = Batch.from_dict({"input_ids": torch.zeros(1, 2, dtype=torch.long)},
                            non_tensors={"raw_prompt": ["p"]})  # fmt: skip
    path = write_rollout_dump(tmp_path, 3, batch)
    assert json.loads(path.read_text()) == {"raw_prompt": "p"}
    assert synced[-1] == str(tmp_path / "rollouts") and len(synced) == 2
    assert Path(synced[0]).parent == path.parent and synced[0] != str(path)


def test_a_step_dump_that_fails_to_write_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk left ``rollouts/.step_N.pt.tmp`` behind; the atomic writer removes it."""
    import errno

    from hfsdk_run_records.step_dump import step_dump_path, write_step_dump

    def full_disk(obj: object, f: Any, *args: object, **kwargs: object) -> None:
        # As a save cut short does: part of the file written (to a path or an open file).
        if hasattr(f, "write"):
            f.write(b"partial")
        else:
            Path(f).write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError) as info:
        write_step_dump(tmp_path, 2, [], None)
    assert info.value.errno == errno.ENOSPC
    assert list((tmp_path / "rollouts").iterdir()) == []
    assert not step_dump_path(tmp_path, 2).exists()
