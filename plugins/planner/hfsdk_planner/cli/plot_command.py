"""``hfsdk plot``: a run's curves and per-stage step times as one PNG."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="plot")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the PNG [default: RUN_DIR/run.png].",
)
def plot(run_dir: Path, out: Path | None) -> None:
    """Draw RUN_DIR's reward, KL, response length, losses and stage times per step."""
    from hfsdk_planner.run_plot import draw_run, load_run_metrics

    rows = load_run_metrics(run_dir)
    written = draw_run(rows, out or run_dir / "run.png", title=str(run_dir))
    click.echo(f"wrote {written} ({len(rows)} steps)")
