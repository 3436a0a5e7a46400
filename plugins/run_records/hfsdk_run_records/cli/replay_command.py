"""``hfsdk replay``: re-run a logged step's update from what the run dumped, compare exactly."""

from __future__ import annotations

import sys
from pathlib import Path

import click

EXIT_DIFFERS = 1
"""A replayed update's metrics differ from the logged ones (the run did not reproduce)."""


@click.command(name="replay")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--step", "step", type=int, required=True, help="The step whose update to replay.")
def replay(run_dir: Path, step: int) -> None:
    """Replay step N of RUN_DIR (made with trainer.rollout_dump: true): its losses and gradient
    norm are compared bit for bit with the logged ones (and those of the steps replayed on
    the way there); exit 1 when any of them differ."""
    from hfsdk import HfsdkError
    from hfsdk_run_records.replay import replay_steps

    results = replay_steps(run_dir, step)
    # Where the replay first diverges: every later step starts from its differing state.
    first = next((r for r in results if r.compared and r.differing), None)
    for result in results:
        if not result.compared:  # nothing compared is no evidence of a reproduction
            raise HfsdkError(
                f"step {result.step}: none of the replayed metrics is in that step's line of "
                f"metrics.jsonl in {str(run_dir)!r} (the log was edited or cut); nothing to compare"
            )
        differing = result.differing
        if result.step == step or result is first:
            width = max((len(k) for k in result.compared), default=0)
            for key in result.compared:
                mark = "  DIFFERS" if key in differing else ""
                click.echo(
                    f"  {key:<{width}}  logged {result.logged[key]!r:<24} "
                    f"replayed {result.replayed[key]!r}{mark}"
                )
        verdict = "reproduced exactly" if not differing else f"{len(differing)} metric(s) differ"
        click.echo(f"step {result.step}: {len(result.compared)} metrics compared, {verdict}")
    if first is not None:  # any replayed step, not only step N: the run did not reproduce
        if first.step != step:
            click.echo(
                f"the replay first differs at step {first.step}, so step {step} was replayed "
                f"from a state that already differed; study step {first.step}"
            )
        sys.stdout.flush()
        raise SystemExit(EXIT_DIFFERS)  # click.exceptions.Exit would be returned, not exited
