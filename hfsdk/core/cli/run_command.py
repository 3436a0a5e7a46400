"""``hfsdk run``: train with an algorithm."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from hfsdk.core.cli.options import run_config_options, task_base, task_option

DEFAULT_TASK_NOTE = ("no data.train_files: `hfsdk run` trains on the built-in default task "
                     "(its prompts, and its model and reward where unset)")  # fmt: skip
"""What ``hfsdk config show`` and ``hfsdk run`` say of a config without data."""


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
    from hfsdk.core.config.loader import load_yaml
    from hfsdk.core.config.sources import ConfigLayers
    from hfsdk.core.trainer.trainer import Trainer

    if ray_address:  # a JSON string is a YAML string: '[::1]:6379', 'yes', 'null' stay strings
        overrides = (*overrides, f"trainer.ray_address={json.dumps(ray_address)}")
    data = load_yaml(config_file) if config_file else {}  # once: a pipe reads empty the next time
    base = task_base(task, algo, data, overrides)
    cfg = load_run_config(algo, config_file, overrides, base=base, file_data=data)
    layers = ConfigLayers.read(algo, config_file, overrides, base=base, task=task, file_data=data)
    trainer = Trainer(cfg, run_dir, quiet=quiet)
    if notice := layers.dropped_preset():  # after the checks: an error stays the only line
        click.echo(f"note: {notice}", err=True)
    actor = cfg.sections.get("actor")  # (a teacher's or reward model's path is no such slip)
    if actor is not None and actor.model_path and not cfg.data.train_files:  # logged: hfsdk.log
        own = "actor.model_path is set: set data.train_files for your own data"
        logging.getLogger(__name__).warning(f"note: {DEFAULT_TASK_NOTE}; {own}")
    write_sources(Path(trainer.run_dir), layers.sources())
    if metrics := trainer.fit():
        click.echo(run_summary(cfg.algo, metrics, trainer.run_dir))


def write_sources(run_dir: Path, sources: dict[str, str]) -> None:
    """``<run_dir>/config_sources.yaml``: each key that is not at its default and where its
    value came from (written atomically)."""
    import yaml

    from hfsdk.core.atomic import write_text_atomic
    from hfsdk.core.config.sources import SOURCES_FILE

    if run_dir.is_dir():
        header = "# where each value of config.yaml came from; keys not listed have their default\n"
        text = header + yaml.safe_dump(dict(sorted(sources.items())), sort_keys=False)
        write_text_atomic(run_dir / SOURCES_FILE, text)


def run_summary(algo: str, metrics: list[dict], run_dir: object) -> str:
    """One line: steps, run directory, reward (and cost) over the first and last (at most 5,
    never overlapping) steps; programs that sample nothing while training (SFT, DPO, reward
    models) report their validation's instead. A validation before training (step 0) is
    neither counted nor averaged into the first window."""
    validations_too = metrics
    metrics = [r for r in metrics if r.get("step", 1) >= 1]
    if not metrics:
        return f"{algo}: 0 steps in {run_dir}"
    size = max(1, min(5, len(metrics) // 2))
    first, last = metrics[:size], metrics[-size:]

    def known(rows: list[dict], key: str) -> list[float]:  # NaN is logged as null: neither
        return [r[key] for r in rows if r.get(key) is not None and r[key] == r[key]]

    def mean(rows: list[dict], key: str) -> float:
        return sum(values) / len(values) if (values := known(rows, key)) else float("nan")

    summary = f"{algo}: {len(metrics)} step{'s' if len(metrics) != 1 else ''} in {run_dir}"
    keys = ("val/reward_mean", "val/pairwise_accuracy", "val/loss")
    if known(metrics, "reward/mean"):  # (else, nothing scored: no nan to show)
        label = f" {size}" if size > 1 else ""
        later = f" (first{label}) -> {mean(last, 'reward/mean'):.3f} (last{label})"  # not at 1
        summary += f"; reward/mean {mean(first, 'reward/mean'):.3f}{later * (len(metrics) > 1)}"
    elif validated := next((key for key in keys if known(validations_too, key)), None):
        validations = [r for r in validations_too if known([r], validated)]
        ends = validations[:1] + validations[1:][-1:]  # one validation: no "x -> x"
        span = " -> ".join(f"{r[validated]:.3f} (step {r['step']})" for r in ends)
        summary += f"; {validated} {span}"
    if "cost/mean" in metrics[-1]:
        later = f" -> {mean(last, 'cost/mean'):.3f}" if len(metrics) > 1 else ""
        summary += f"; cost/mean {mean(first, 'cost/mean'):.3f}{later}"
    return summary
