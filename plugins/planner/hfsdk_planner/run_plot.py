"""One picture of a run: its learning curves and where each step's time went.

``hfsdk plot RUN_DIR`` reads ``metrics.jsonl`` and draws, in one PNG: the
reward (and validation reward), the KL to the reference, the response length,
the losses, a stacked bar per step of the stage times (``timing/*_s``;
generation without the resharding, drawn as its own stage; the log-prob and
value passes, which run concurrently, side by side; ``other`` is the rest of
the step: the controller's own work and what no stage timed), each stage's
share of the device's peak (``perf/*_mfu``,
``perf/*_bandwidth_util``, ``perf/*_link_util``: what the planner's step
observer logs, docs/placement.md), a panel of the validation metrics not drawn beside
the reward (``val/pairwise_accuracy``, a source's ``val/<source>/reward_mean``), and one
panel per metric namespace no panel above draws (a
plugin's own metrics, e.g. ``lagrange/*``) plus the metrics asked for with
``--metric``. Stages keep their colour from run to run. matplotlib is
imported only when drawing.
"""

from __future__ import annotations

import fnmatch
import math
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from hfsdk import METRICS_FILE, HfsdkError, atomic_path, read_metrics
from hfsdk_planner.run_plan import CONCURRENT_STAGES, measured_stages, numeric_rows

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

UNDRAWN_NAMESPACES = ("timing", "perf", "val")
"""Namespaces the per-namespace panels leave out: stage times have their bar, ``perf/*`` are
throughput counters, ``val/*`` has its estimators beside the reward and the rest in
:data:`VALIDATION_PANEL`."""

ESTIMATOR_PATTERN = re.compile(r"val/(?:.+/)?(pass|mean|maj)@\d+")  # a source may hold / and @
"""The validation estimators drawn beside the reward: ``val/pass@k`` and a data source's
``val/<source>/pass@k`` (likewise ``mean@n``, ``maj@k``)."""
VALIDATION_PANEL = "val/* (other validation metrics)"

UTILISATION_PATTERNS = ("perf/*_mfu", "perf/*_bandwidth_util", "perf/*_link_util")
"""The per-stage shares of the peaks (:mod:`hfsdk_planner.utilisation`): one panel."""
UTILISATION_PANEL = "share of the peak per stage (MFU, bandwidth)"

PLANNER_TIMINGS = (
    "generation",
    "reshard",
    *CONCURRENT_STAGES,
    "advantages",
    "update_critic",
    "update_actor",
    "update_score_model",
)
"""The stage timings :func:`~hfsdk_planner.run_plan.measured_stages` reads by name; the
others (signals scored by functions, validation, a plugin's) it is told of."""

TOTAL_KEY = "timing/step_s"
SKIPPED_STAGES = ("timing/data_s",)
"""Stages too small to draw (loading the next prompts); they count towards ``other``."""


def load_run_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's per-step metrics, every value a number (one that is not is skipped with a
    warning: :func:`~hfsdk_planner.run_plan.numeric_rows`); a clear error when the directory
    holds none."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise HfsdkError(
            f"RUN_DIR {str(run_dir)!r} is a file, not a run directory; pass the directory of a "
            f"run, the one that holds its {METRICS_FILE}"
        )
    if not run_dir.is_dir():
        raise HfsdkError(f"RUN_DIR {str(run_dir)!r} does not exist; pass the directory of a run")
    # A value that is no number (a hand-edited log) is skipped with a warning, not float()ed.
    logged = numeric_rows(read_metrics(run_dir), run_dir / METRICS_FILE, "not drawn")
    rows = [r for r in logged if "step" in r]
    if not rows:
        state = "has no steps" if (run_dir / METRICS_FILE).exists() else "does not exist"
        raise HfsdkError(
            f"{run_dir / METRICS_FILE} {state}; plot a run that trained with the jsonl "
            "logger (trainer.loggers includes jsonl, the default)"
        )
    return rows


def _stage_names(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The ``timing/*_s`` keys the bars draw, in order of first appearance."""
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
    return [name.removeprefix("timing/").removesuffix("_s") for name in names]


def _covered_seconds(row: dict[str, Any], names: Sequence[str]) -> float:
    """How much of the step the stages of ``row`` cover: the planner's measured stages
    (:func:`~hfsdk_planner.run_plan.measured_stages`: generation without the resharding,
    the concurrent passes as their longest) plus the stages it does not price, which run
    one after another."""
    others = tuple(name for name in names if name not in PLANNER_TIMINGS)
    return math.fsum(measured_stages(row, others).values())


def stage_times(rows: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Seconds per stage per step, in order of first appearance, plus ``other``.

    A stage missing from a step (e.g. the old-log-prob pass when it was
    skipped) counts 0 there. ``generation`` excludes the resharding (its own
    ``reshard`` stage), as :func:`~hfsdk_planner.run_plan.measured_stages`
    does. ``other`` is the step time the stages do not cover, the
    :data:`CONCURRENT_STAGES` counting once, as their longest (never negative).
    """
    names = _stage_names(rows)
    stages = {name: [float(r.get(f"timing/{name}_s", 0.0)) for r in rows] for name in names}
    if "generation" in stages:
        # timing/generation_s includes the resharding, which the reshard stage draws.
        stages["generation"] = [measured_stages(r)["generation"] for r in rows]
    totals = [float(r.get(TOTAL_KEY, 0.0)) for r in rows]
    covered = [_covered_seconds(r, names) for r in rows]
    stages["other"] = [max(0.0, t - c) for t, c in zip(totals, covered, strict=True)]
    return stages


@attrs.frozen
class BarSegment:
    """One stage's part of the per-step bars: where each step's piece starts and how tall
    it is, and which slice of the bar's width it takes (concurrent passes share the width)."""

    name: str
    heights: list[float]
    bottoms: list[float]
    offset: float = 0.0
    """Shift of the piece's centre from the step, as a share of :data:`BAR_WIDTH`."""
    width: float = 1.0
    """The piece's width as a share of :data:`BAR_WIDTH`."""


BAR_WIDTH = 0.8


def bar_segments(rows: Sequence[dict[str, Any]]) -> list[BarSegment]:
    """The stacked bar of each step, stage by stage (:func:`stage_times`).

    Stages that ran one after another stack; the :data:`CONCURRENT_STAGES`
    stand side by side from the same height, and the next stage starts above
    the longest of them, so a bar is never taller than its step.
    """
    stages = stage_times(rows)
    concurrent = [name for name in stages if name in CONCURRENT_STAGES]
    bottom = [0.0] * len(rows)
    segments: list[BarSegment] = []
    for name, heights in stages.items():
        if name in concurrent[1:]:
            continue  # drawn beside the first of them
        if name not in concurrent:
            segments.append(BarSegment(name, heights, bottom))
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
            continue
        share = 1 / len(concurrent)
        for index, passed in enumerate(concurrent):
            offset = (index + 0.5) * share - 0.5
            segments.append(BarSegment(passed, stages[passed], bottom, offset, share))
        longest = [max(column) for column in zip(*(stages[c] for c in concurrent), strict=True)]
        bottom = [b + h for b, h in zip(bottom, longest, strict=True)]
    return segments


def stage_color(name: str) -> str:
    """The colour of stage ``name``: its own for the known stages, else one picked by the
    name alone, so the stages a run skips or adds never recolour the others."""
    if name in STAGE_COLORS:
        return STAGE_COLORS[name]
    return EXTRA_COLORS[zlib.crc32(name.encode()) % len(EXTRA_COLORS)]


def _numeric(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every metric key some row holds a number for, in order of first appearance."""
    keys: dict[str, None] = {}
    for row in rows:
        for key, value in row.items():
            if key != "step" and isinstance(value, int | float) and not isinstance(value, bool):
                keys.setdefault(key, None)
    return list(keys)


def validation_estimators(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The :data:`ESTIMATOR_PATTERN` keys of ``rows``, by name then by k, so ``pass@2``
    follows ``pass@1`` rather than ``pass@16``."""
    found = [k for k in _numeric(rows) if ESTIMATOR_PATTERN.fullmatch(k)]
    return sorted(found, key=lambda k: (k.rsplit("@", 1)[0], int(k.rsplit("@", 1)[1])))


def _other_validation(keys: Sequence[str]) -> list[str]:
    """The ``val/*`` keys neither the reward panel nor its estimators draw (a reward
    model's ``val/pairwise_accuracy``, a source's ``val/<source>/reward_mean``)."""
    beside_reward = set(CURVES[0][1])
    return [
        k
        for k in keys
        if k.startswith("val/") and k not in beside_reward and not ESTIMATOR_PATTERN.fullmatch(k)
    ]


def extra_panels(
    rows: Sequence[dict[str, Any]], chosen: Sequence[str] = ()
) -> list[tuple[str, tuple[str, ...]]]:
    """Panels beyond :data:`CURVES`: ``chosen`` metrics, the stages' utilisation
    (:data:`UTILISATION_PATTERNS`, when logged), the validation metrics not drawn beside
    the reward (:data:`VALIDATION_PANEL`, when logged), then one per undrawn namespace.

    ``chosen`` are glob patterns (``--metric 'actor/*'``); a pattern that matches
    nothing is an error naming what the run logged. A namespace (the part before
    ``/``) gets a panel when no :data:`CURVES` panel draws any of its keys and it
    is not one of :data:`UNDRAWN_NAMESPACES`: what a plugin logs under its own
    name (``lagrange/multiplier``) is drawn without being listed here.
    """
    keys = _numeric(rows)
    panels: list[tuple[str, tuple[str, ...]]] = []
    if chosen:
        picked: dict[str, None] = {}
        for pattern in chosen:
            found = [k for k in keys if fnmatch.fnmatchcase(k, pattern)]
            if not found:
                raise HfsdkError(
                    f"--metric {pattern!r} matches no metric of this run; it logged "
                    f"{', '.join(keys)}"
                )
            picked.update(dict.fromkeys(found))
        panels.append(("chosen metrics", tuple(picked)))
    shares = [k for k in keys if any(fnmatch.fnmatchcase(k, p) for p in UTILISATION_PATTERNS)]
    if shares:
        panels.append((UTILISATION_PANEL, tuple(shares)))
    validation = _other_validation(keys)
    if validation:
        panels.append((VALIDATION_PANEL, tuple(validation)))
    covered = {key.split("/")[0] for _panel, panel_keys in CURVES for key in panel_keys}
    by_namespace: dict[str, list[str]] = {}
    for key in keys:
        namespace = key.split("/")[0] if "/" in key else "other"
        if namespace not in covered and namespace not in UNDRAWN_NAMESPACES:
            by_namespace.setdefault(namespace, []).append(key)
    panels.extend((f"{ns}/*", tuple(ks)) for ns, ks in by_namespace.items())
    return panels


def draw_run(
    rows: Sequence[dict[str, Any]],
    path: str | Path,
    title: str = "",
    metrics: Sequence[str] = (),
) -> Path:
    """Draw the curves, the stage breakdown and the extra panels (:func:`extra_panels`,
    ``metrics`` the ``--metric`` patterns) of ``rows`` into ``path`` (PNG, atomically)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:  # pragma: no cover - depends on the environment
        raise HfsdkError(
            "hfsdk plot needs matplotlib; install it with "
            "`pip install 'hfsdk-plugin-planner[plot]'`"
        ) from None
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise HfsdkError(
            f"--out {str(path)!r}: the picture is a PNG; give a file name ending in .png"
        )
    steps = [int(r["step"]) for r in rows]
    extra = extra_panels(rows, metrics)
    extra_rows = -(-len(extra) // 3)
    fig = plt.figure(figsize=(15, 4 * (2 + extra_rows)))
    grid = fig.add_gridspec(2 + extra_rows, 3)
    estimators = validation_estimators(rows)
    slots = [(i // 3, i % 3) for i in range(len(CURVES))]  # the stage bars take row 1's rest
    slots += [(2 + i // 3, i % 3) for i in range(len(extra))]
    for index, (panel, keys) in enumerate([*CURVES, *extra]):
        if index == 0:  # validation estimators (val/pass@k, ...) beside the reward
            keys = (*keys, *estimators)
        ax = fig.add_subplot(grid[slots[index]])
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
    for piece in bar_segments(rows):
        ax.bar(
            [step + piece.offset * BAR_WIDTH for step in steps],
            piece.heights,
            width=piece.width * BAR_WIDTH,
            bottom=piece.bottoms,
            label=piece.name,
            color=stage_color(piece.name),
        )
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
        save_figure(fig, path, dpi=90, format="png")
    finally:
        plt.close(fig)
    return path


def save_figure(fig: Any, path: Path, **options: Any) -> None:
    """``fig.savefig`` to ``path`` atomically; a folder that takes no new file (``/proc``, a
    read-only mount) is a one-line error rather than matplotlib's internal one."""
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, **options)
    except OSError as exc:
        raise HfsdkError(
            f"cannot write {str(path)!r}: {exc.strerror or exc}; give a path in a folder you "
            "can write"
        ) from None
