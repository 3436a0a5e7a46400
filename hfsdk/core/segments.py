"""Step-wise trajectories: one training row per segment, outcomes counted once per trajectory.

A rollout may return several rows for one trajectory (its *segments*: an agent
whose context was rewritten between turns, so the tokens after the rewrite are
trained on the context the model saw). Such a rollout output carries the
non-tensor column :data:`SEGMENT_INDEX`: 0 on a trajectory's first row, then
1, 2, ... on the rows that follow it, consecutively. Rows keep that order
through concatenation (data-parallel ranks' outputs) and row selection, so the
trajectories of a batch are read off the column alone; :func:`number_trajectories`
writes :data:`TRAJECTORY_ID` (the trajectory's position in the batch) after
generation.

Outcome values are the trajectory's: :meth:`hfsdk.Algorithm.score` scores the
last segment of each trajectory (:func:`last_segments`) and gives that score to
every segment; :meth:`hfsdk.Algorithm.estimate_advantages` runs the estimator on
one row per trajectory (group statistics count each trajectory once) and
broadcasts each trajectory's advantage to its segments' trained tokens. Only
estimators registered with ``per_sequence=True`` (one advantage per sequence)
can be broadcast so; others refuse a multi-segment batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    import torch

    from hfsdk.core.batch import Batch
    from hfsdk.core.maths.protocols import AdvantageResult

SEGMENT_INDEX = "segment_index"
"""Non-tensor column: the row's position among its trajectory's segments (0 first)."""
TRAJECTORY_ID = "trajectory_id"
"""Non-tensor column: the trajectory's position in the batch (:func:`number_trajectories`)."""


@attrs.frozen
class TrajectoryRows:
    """Where the trajectories of a multi-segment batch sit.

    ``of_row``: (rows,) each row's trajectory (0, 1, ... in batch order);
    ``last``: (trajectories,) the row of each trajectory's last segment.
    """

    of_row: torch.Tensor
    last: torch.Tensor

    @property
    def count(self) -> int:
        """How many trajectories."""
        return int(self.last.numel())

    def broadcast(self, per_trajectory: torch.Tensor) -> torch.Tensor:
        """A (trajectories, ...) tensor as (rows, ...): each row gets its trajectory's value."""
        return per_trajectory[self.of_row.to(per_trajectory.device)]


def trajectory_rows(batch: Batch) -> TrajectoryRows | None:
    """The trajectories of ``batch``; ``None`` without a :data:`SEGMENT_INDEX` column.

    An index that does not start a trajectory at 0 or skips one is an error:
    the segments of a trajectory must be consecutive rows.
    """
    import torch

    if SEGMENT_INDEX not in batch.non_tensor_keys:
        return None
    indices = [int(i) for i in batch[SEGMENT_INDEX]]
    of_row: list[int] = []
    last: list[int] = []
    for row, index in enumerate(indices):
        if index == 0:
            last.append(row)
        elif not last or index != indices[row - 1] + 1:
            raise HfsdkError(
                f"row {row} has {SEGMENT_INDEX}={index} after "
                f"{indices[row - 1] if row else 'no row'}; a trajectory's segments must be "
                "consecutive rows numbered 0, 1, 2, ... (keep the rollout's row order)"
            )
        else:
            last[-1] = row
        of_row.append(len(last) - 1)
    return TrajectoryRows(
        of_row=torch.tensor(of_row, dtype=torch.long), last=torch.tensor(last, dtype=torch.long)
    )


def number_trajectories(batch: Batch) -> Batch:
    """Write :data:`TRAJECTORY_ID` (the trajectory's position) on a batch with segments.

    Done on the controller after generation: ids a rank wrote would repeat across ranks.
    """
    rows = trajectory_rows(batch)
    if rows is not None:
        batch[TRAJECTORY_ID] = rows.of_row.tolist()
    return batch


def last_segments(batch: Batch) -> Batch:
    """One row per trajectory (its last segment); ``batch`` itself when it has no segments."""
    rows = trajectory_rows(batch)
    if rows is None or rows.count == len(batch):
        return batch
    return batch.index(rows.last)


def broadcast_advantages(
    result: AdvantageResult, last_mask: torch.Tensor, batch: Batch, rows: TrajectoryRows
) -> AdvantageResult:
    """Each trajectory's advantage (and return) on every trained token of its segments.

    ``result`` is the estimator's on the trajectories' last segments (``last_mask``
    their response mask); a trajectory's value is the one at its first trained
    token (a per-sequence estimator's single value). A trajectory without a
    trained token in its last segment gets 0.
    """
    import torch

    from hfsdk.core.maths.protocols import AdvantageResult

    if result.extras:
        raise HfsdkError(
            f"the advantage estimator returned extras {sorted(result.extras)}, which cannot be "
            "broadcast to the segments of step-wise trajectories; use a per-sequence estimator"
        )
    trained = last_mask.bool()
    first = trained.float().argmax(dim=-1)
    picked = torch.arange(trained.shape[0])

    def spread(values: torch.Tensor) -> torch.Tensor:
        per_trajectory = torch.where(
            trained.any(dim=-1), values[picked, first], torch.zeros_like(values[:, 0])
        )
        mask = batch["response_mask"].to(values.dtype)
        return rows.broadcast(per_trajectory).unsqueeze(-1) * mask

    return AdvantageResult(advantages=spread(result.advantages), returns=spread(result.returns))
