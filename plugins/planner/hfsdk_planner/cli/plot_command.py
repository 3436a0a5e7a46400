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
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="PATTERN",
    help="Also draw these metrics in one panel: a name or a glob, e.g. --metric 'actor/*' "
    "(repeatable). A namespace no panel draws (a plugin's own) gets its panel anyway.",
)
def plot(run_dir: Path, out: Path | None, metrics: tuple[str, ...]) -> None:
    """Draw RUN_DIR's reward, KL, response length, losses, stage times per step and the
    metrics of any namespace those leave out (a plugin's own)."""
    from hfsdk_planner.run_plot import draw_run, load_run_metrics

    rows = load_run_metrics(run_dir)
    written = draw_run(rows, out or run_dir / "run.png", title=str(run_dir), metrics=metrics)
    click.echo(f"wrote {written} ({len(rows)} steps)")
