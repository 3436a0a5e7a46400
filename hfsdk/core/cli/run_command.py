"""``hfsdk run``: train with an algorithm."""

from __future__ import annotations

import click

from hfsdk.core.cli.options import run_config_options, task_base, task_option


@click.command()
@run_config_options
@click.option("--run-dir", default=None, help="Run directory (default runs/<algo>-<timestamp>).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@task_option
@click.option(
    "--ray-address",
    default=None,
    help="Join this Ray cluster (default: RAY_ADDRESS, else start a local instance).",
)
def run(
    algo: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    run_dir: str | None,
    quiet: bool,
    task: str,
    ray_address: str | None,
) -> None:
    """Train: `hfsdk run --algo NAME` runs the built-in tiny task on CPU (hfsdk list algorithms)."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    if ray_address:
        overrides = (*overrides, f"trainer.ray_address={ray_address}")
    cfg = load_run_config(algo, config_file, overrides, base=task_base(task))
    trainer = Trainer(cfg, run_dir, quiet=quiet)
    metrics = trainer.fit()
    if not metrics:
        return
    first, last = metrics[: min(5, len(metrics))], metrics[-min(5, len(metrics)) :]

    def mean(rows: list[dict], key: str) -> float:
        values = [r[key] for r in rows if r.get(key) is not None]
        return sum(values) / len(values) if values else float("nan")

    summary = (
        f"{cfg.algo}: {len(metrics)} steps in {trainer.run_dir}; reward/mean "
        f"{mean(first, 'reward/mean'):.3f} (first 5) -> {mean(last, 'reward/mean'):.3f} (last 5)"
    )
    # Programs that sample nothing while training: the validation reward (SFT, DPO) or, for
    # a reward model, its held-out pairwise accuracy.
    for key in ("val/reward_mean", "val/pairwise_accuracy"):
        validations = [r for r in metrics if r.get(key) is not None]
        if not any("reward/mean" in r for r in metrics) and validations:
            summary = (
                f"{cfg.algo}: {len(metrics)} steps in {trainer.run_dir}; {key} "
                f"{validations[0][key]:.3f} (step {validations[0]['step']}) -> "
                f"{validations[-1][key]:.3f} (step {validations[-1]['step']})"
            )
            break
    if "cost/mean" in metrics[-1]:
        summary += f"; cost/mean {mean(first, 'cost/mean'):.3f} -> {mean(last, 'cost/mean'):.3f}"
    click.echo(summary)
