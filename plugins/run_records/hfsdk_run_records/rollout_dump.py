"""``trainer.rollout_dump``: each step's trajectories as JSON lines a person can read.

``RUN_DIR/rollouts/step_N.jsonl``, one line per sample: the prompt, the response
text, the reward, token counts (response, trained), and for multi-turn rollouts
the segments (role, text, token count, whether trained, tool calls and results)
and how the trajectory ended. Written atomically (a temporary file renamed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfsdk import StepObserver, write_text_atomic

if TYPE_CHECKING:
    from hfsdk import Batch, StepView

DUMP_DIR = "rollouts"


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def dump_records(batch: Batch) -> list[dict[str, Any]]:
    """One JSON-ready record per sample of a finished step's batch."""
    rows = len(batch)
    mask = batch["response_mask"] if "response_mask" in batch.tensor_keys else None
    present = batch["attention_mask"][:, -mask.shape[1] :] if mask is not None else None
    scores = (
        batch["token_level_scores"].sum(dim=-1)
        if "token_level_scores" in batch.tensor_keys
        else None
    )
    records = []
    for row in range(rows):
        record: dict[str, Any] = {}
        for key in ("uid", "trajectory_id", "segment_index", "raw_prompt", "response_text"):
            if key in batch.non_tensor_keys:
                record[key] = _plain(batch[key][row])
        if scores is not None:
            record["reward"] = float(scores[row])
        if mask is not None and present is not None:
            record["response_tokens"] = int(present[row].sum())
            record["trained_tokens"] = int(mask[row].sum())
        if "agent_trajectory" in batch.non_tensor_keys:
            record["trajectory"] = _plain(batch["agent_trajectory"][row])
        records.append(record)
    return records


def write_rollout_dump(run_dir: str | Path, step: int, batch: Batch) -> Path:
    """Write ``run_dir/rollouts/step_<step>.jsonl`` atomically; returns its path."""
    path = Path(run_dir) / DUMP_DIR / f"step_{step}.jsonl"
    lines = (json.dumps(record, default=str) + "\n" for record in dump_records(batch))
    write_text_atomic(path, "".join(lines))
    return path


SEGMENTS_FILE = "segments.json"
"""``rollouts/segments.json``: ``[[first step, trainer.total_steps], ...]``, one entry per
run segment (a start or a resume): a resume may change the length of a cosine schedule,
and replay rebuilds the one each step trained under."""


def record_segment(run_dir: str | Path, first_step: int, total_steps: int) -> None:
    """Add this segment to :data:`SEGMENTS_FILE`, dropping entries it trains over again (a
    resume from an older checkpoint)."""
    path = Path(run_dir) / DUMP_DIR / SEGMENTS_FILE
    kept = [entry for entry in read_segments(run_dir) if entry[0] < first_step]
    write_text_atomic(path, json.dumps([*kept, [first_step, total_steps]]) + "\n")


def read_segments(run_dir: str | Path) -> list[list[int]]:
    """The entries of :data:`SEGMENTS_FILE` (none for a run from before it)."""
    path = Path(run_dir) / DUMP_DIR / SEGMENTS_FILE
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [e for e in entries if isinstance(e, list) and all(type(x) is int for x in e)]


class RolloutDumpObserver(StepObserver):
    """Writes each step's ``rollouts/step_N.jsonl`` (readable) and ``.pt`` (replay), and the
    run segments' schedule lengths (:data:`SEGMENTS_FILE`)."""

    def __init__(self) -> None:
        self.recorded = False

    def on_step_start(self, view: StepView) -> None:
        """Record this run segment's first step and ``trainer.total_steps`` once."""
        if not self.recorded:
            record_segment(view.run_dir, view.step, view.config.trainer.total_steps)
            self.recorded = True

    def on_step_trained(self, view: StepView) -> None:
        """Dump the step's batch and generations (the update's batch unless ``rollout_only``)."""
        from hfsdk_run_records.step_dump import write_step_dump

        batch = view.algorithm.last_batch
        if batch is not None:
            write_rollout_dump(view.run_dir, view.step, batch)
        update = batch if view.config.trainer.mode != "rollout_only" else None
        write_step_dump(view.run_dir, view.step, view.algorithm.generations, update)


def rollout_dump_observer(config: Any, run_dir: Path) -> RolloutDumpObserver | None:
    """The dump observer under ``trainer.rollout_dump`` or ``trainer.mode: rollout_only``."""
    trainer = config.trainer
    return RolloutDumpObserver() if trainer.rollout_dump or trainer.mode == "rollout_only" else None
