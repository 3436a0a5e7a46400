"""One picture of a run: its learning curves and where each step's time went.

``hfsdk plot RUN_DIR`` reads ``metrics.jsonl`` and draws, in one PNG: the
reward (and validation reward), the KL to the reference, the response length,
the losses, and a stacked bar per step of the stage times (``timing/*_s``;
``other`` is the rest of the step: the controller's own work and what no
stage timed). matplotlib is imported only when drawing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hfsdk import HfsdkError, atomic_path
from hfsdk.core.trainer.tracking import METRICS_FILE, read_metrics

CURVES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward and validation", ("reward/mean", "val/reward_mean", "cost/mean")),
    ("KL to the reference", ("actor/kl",)),
    ("response length (tokens)", ("response_length/mean",)),
    ("losses", ("actor/pg_loss", "actor/loss", "critic/vf_loss", "cost_critic/vf_loss")),
)
"""Panel title -> the metrics it draws (those a run has)."""

STAGE_COLORS = {
    "generation": "tab:orange",
    "old_log_prob": "tab:green",
    "ref_log_prob": "tab:red",
    "values": "tab:cyan",
    "reward": "tab:purple",
    "cost": "tab:pink",
    "advantages": "tab:blue",
    "update_critic": "tab:olive",
    "update_actor": "tab:brown",
    "other": "lightgrey",
}
"""Stages keep their colour from run to run (a skipped stage must not recolour the rest)."""
EXTRA_COLORS = ("tab:gray", "gold", "navy", "teal", "salmon", "darkkhaki")

TOTAL_KEY = "timing/step_s"
SKIPPED_STAGES = ("timing/data_s",)
"""Stages too small to draw (loading the next prompts); they count towards ``other``."""


def load_run_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's per-step metrics; a clear error when the directory holds none."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HfsdkError(
            f"run directory {str(run_dir)!r} does not exist; pass a --run-dir of a run"
        )
    rows = [r for r in read_metrics(run_dir) if "step" in r]
    if not rows:
        raise HfsdkError(
            f"{run_dir / METRICS_FILE} has no steps; plot a run that trained with the jsonl "
            "logger (trainer.loggers includes jsonl, the default)"
        )
    return rows


def stage_times(rows: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Seconds per stage per step, in order of first appearance, plus ``other``.

    A stage missing from a step (e.g. the old-log-prob pass when it was
    skipped) counts 0 there. ``other`` is the step time the stages do not
    cover (never negative).
    """
    names: list[str] = []
    for row in rows:
        for key in row:
            if (
                key.startswith("timing/")
                and key.endswith("_s")
                and key not in (TOTAL_KEY, *SKIPPED_STAGES)
                and key not in names
            ):
                names.append(key)
    stages = {
        name.removeprefix("timing/").removesuffix("_s"): [float(r.get(name, 0.0)) for r in rows]
        for name in names
    }
    totals = [float(r.get(TOTAL_KEY, 0.0)) for r in rows]
    covered = [sum(values[i] for values in stages.values()) for i in range(len(rows))]
    stages["other"] = [max(0.0, t - c) for t, c in zip(totals, covered, strict=True)]
    return stages


def draw_run(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Draw the curves and the stage breakdown of ``rows`` into ``path`` (PNG, atomically)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:  # pragma: no cover - depends on the environment
        raise HfsdkError(
            "hfsdk plot needs matplotlib; install it with `pip install 'hfsdk[plot]'`"
        ) from None
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise HfsdkError(
            f"--out {str(path)!r}: the picture is a PNG; give a file name ending in .png"
        )
    steps = [int(r["step"]) for r in rows]
    fig = plt.figure(figsize=(15, 8))
    grid = fig.add_gridspec(2, 3)
    estimators = sorted(
        {k for r in rows for k in r if re.fullmatch(r"val/(pass|mean|maj)@\d+", k)},
        key=lambda k: (k.split("@")[0], int(k.split("@")[1])),
    )
    for index, (panel, keys) in enumerate(CURVES):
        if index == 0:  # validation estimators (val/pass@k, ...) beside the reward
            keys = (*keys, *estimators)
        ax = fig.add_subplot(grid[index // 3, index % 3])
        drawn = False
        for key in keys:
            points = [(int(r["step"]), float(r[key])) for r in rows if key in r]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", markersize=3, label=key)
                drawn = True
        ax.set_title(panel)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
    ax = fig.add_subplot(grid[1, 1:])
    bottom = [0.0] * len(rows)
    for name, values in stage_times(rows).items():
        ax.bar(
            steps, values, bottom=bottom, label=name, color="lightgrey" if name == "other" else None
        )
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_title("time per step by stage")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3, axis="y")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=90, format="png")
    finally:
        plt.close(fig)
    return path
