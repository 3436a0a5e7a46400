"""``hfsdk data inspect``: check a dataset before a run (no Ray, no model)."""

from __future__ import annotations

import click


@click.group()
def data() -> None:
    """Inspect datasets."""


@data.command(name="inspect")
@click.argument("files", nargs=-1, metavar="[FILE]... [KEY.SUB=VALUE]...")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Run config whose data, actor and reward sections apply (files default to "
    "data.train_files; with an algorithm, to what its run resolves: the default task's).",
)
@click.option(
    "--algo",
    default=None,
    help="Check the data as a run of this algorithm resolves it (default: the config's algo; "
    "without any, only the config's data, actor and reward sections apply).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY.SUB=VALUE",
    help="Config override, e.g. --set data.prompt_key=question (repeatable); a bare "
    "data.prompt_key=question argument, as `hfsdk run` takes, is one too (applied before --set).",
)
def inspect_command(
    files: tuple[str, ...], config_file: str | None, algo: str | None, overrides: tuple[str, ...]
) -> None:
    """Rows, prompt key, the first rendered prompt and its token count, the columns a
    reward function sees, the rows dropped for length, and what a run would refuse —
    before starting a run.

    \b
        hfsdk data inspect train.parquet --config run.yaml
        hfsdk data inspect q.jsonl data.prompt_key=question
        hfsdk data inspect --algo grpo          # the default task's data
    """
    import datasets

    from hfsdk import apply_overrides, load_yaml
    from hfsdk_migration.inspection import (
        FILE_ARGUMENTS,
        check_files,
        inspect_dataset,
        inspect_run,
        split_file_arguments,
    )

    # Bare key.sub=value arguments are overrides, as in `hfsdk run`; --set ones come after.
    files, bare = split_file_arguments(files)
    overrides = (*bare, *overrides)
    datasets.disable_progress_bars()  # the report is the output; loading bars are noise
    raw = load_yaml(config_file) if config_file else {}
    if algo or raw.get("algo"):
        # A run config: the run's own resolution (files, tokenizer, reward functions).
        report = inspect_run(algo, config_file, overrides, files)
        click.echo(report.format())
        return
    raw = apply_overrides(raw, overrides)
    data_section = raw.get("data") or {}
    train_files = data_section.get("train_files") or ()
    if isinstance(train_files, str):
        train_files = (train_files,)
    paths = check_files(files or tuple(train_files))
    actor = raw.get("actor") or {}
    tokenizer = _tokenizer(actor)
    report = inspect_dataset(
        paths,
        tokenizer,
        data_section,
        raw.get("reward"),
        model_path=actor.get("model_path"),
        source=FILE_ARGUMENTS if files else None,
    )
    click.echo(report.format())


def _tokenizer(actor: dict) -> object:
    """The actor's tokenizer (tokenizer_path, else model_path), else the default task's."""
    from hfsdk import default_task_assets, load_tokenizer

    path = actor.get("tokenizer_path") or actor.get("model_path")
    if path:
        return load_tokenizer(str(path))
    return load_tokenizer(str(default_task_assets().tokenizer_dir))
