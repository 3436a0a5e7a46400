"""Draw a plan's execution timeline: one lane per pool, stages left to right.

Stages run one after another; within a stage each pool runs its roles back
to back (they share its devices) while pools run concurrently, so a stage
ends with its slowest pool. matplotlib is imported only here, on demand.
"""

from __future__ import annotations

from pathlib import Path

from hfsdk import HfsdkError
from hfsdk_planner.plan import Plan
from hfsdk_planner.run_plot import save_figure

IMAGE_FORMATS = ("png", "svg", "pdf", "jpg", "jpeg")
"""The suffixes a timeline may be drawn to (matplotlib writes each)."""


def check_image_path(path: str | Path) -> None:
    """Refuse a timeline path of a format not drawn, before the search runs."""
    if Path(path).suffix.lstrip(".").lower() not in IMAGE_FORMATS:
        raise HfsdkError(
            f"--timeline {str(path)!r}: draw to a file ending in one of "
            f"{', '.join('.' + f for f in IMAGE_FORMATS)}"
        )


_COLORS = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip


def timeline_segments(plan: Plan) -> list[tuple[str, str, int, float, float, bool]]:
    """(pool, role, stage index, start, seconds, is_transition) bars of the timeline."""
    bars = []
    stage_start = 0.0
    for index, stage_seconds in enumerate(plan.stage_seconds):
        for pool in plan.pools:
            cursor = stage_start
            for name in pool.roles:
                role = plan.role(name)
                seconds = role.stage_seconds[index]
                if not seconds:
                    continue
                transition = role.transition_seconds if role.transition_stage == index else 0.0
                if transition:
                    bars.append((pool.name, name, index, cursor, transition, True))
                bars.append(
                    (pool.name, name, index, cursor + transition, seconds - transition, False)
                )
                cursor += seconds
        stage_start += stage_seconds
    return bars


def draw_timeline(plan: Plan, path: str | Path) -> Path:
    """Save the timeline of ``plan`` as an image (format from the suffix, e.g. ``.png``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise HfsdkError(
            "drawing a timeline needs matplotlib; install it with "
            "`pip install 'hfsdk-plugin-planner[plot]'`"
        ) from exc
    path = Path(path)
    lanes = {pool.name: i for i, pool in enumerate(plan.pools)}
    colors = {role.role: _COLORS[i % len(_COLORS)] for i, role in enumerate(plan.roles)}
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.8 * len(lanes)))
    seen: set[str] = set()
    for pool, role, _stage, start, seconds, transition in timeline_segments(plan):
        y = lanes[pool]
        ax.barh(
            y,
            seconds,
            left=start,
            height=0.6,
            color=colors[role],
            edgecolor="black",
            linewidth=0.5,
            hatch="//" if transition else None,
            alpha=0.6 if transition else 1.0,
            label=None if role in seen or transition else role,
        )
        if not transition:
            seen.add(role)
        if not transition and seconds > 0.04 * plan.iteration_seconds:
            ax.text(start + seconds / 2, y, role, ha="center", va="center", fontsize=8)
    boundary = 0.0
    for name, seconds in zip(plan.stages, plan.stage_seconds, strict=True):
        ax.axvline(boundary, color="grey", linestyle="--", linewidth=0.8)
        ax.text(boundary + seconds / 2, -0.55, name, ha="center", va="center", fontsize=9)
        boundary += seconds
    ax.axvline(boundary, color="grey", linestyle="--", linewidth=0.8)
    pools = {pool.name: pool for pool in plan.pools}
    ax.set_yticks(range(len(lanes)), [f"{name}\n({pools[name].devices} devices)" for name in lanes])
    ax.set_ylim(len(lanes) - 0.4, -0.8)  # first pool on top, stage names above it
    ax.set_xlabel("seconds (estimated); hatched: train -> generate resharding")
    ax.set_title(
        f"{plan.algorithm} on {plan.num_devices} x {plan.cluster}: "
        f"{plan.iteration_seconds:.1f} s per iteration"
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    try:
        save_figure(fig, path, dpi=120, format=path.suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return path
