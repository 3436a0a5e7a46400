"""``hfsdk data inspect``: check a dataset before a run (no Ray, no model)."""

from __future__ import annotations

import click


@click.group()
def data() -> None:
    """Inspect datasets."""


@data.command(name="inspect")
@click.argument("files", nargs=-1, metavar="[FILE]...")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Run config whose data, actor and reward sections apply (files default to "
    "data.train_files).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY.SUB=VALUE",
    help="Config override, e.g. --set data.prompt_key=question (repeatable).",
)
def inspect_command(
    files: tuple[str, ...], config_file: str | None, overrides: tuple[str, ...]
) -> None:
    """Rows, prompt key, the first rendered prompt and its token count, the columns a
    reward function sees and the rows dropped for length — before starting a run.

    \b
        hfsdk data inspect train.parquet --config run.yaml
    """
    import datasets

    from hfsdk.core.config.loader import apply_overrides, load_yaml
    from hfsdk.core.data.inspection import check_files, inspect_dataset

    datasets.disable_progress_bars()  # the report is the output; loading bars are noise
    raw = load_yaml(config_file) if config_file else {}
    raw = apply_overrides(raw, overrides)
    data_section = raw.get("data") or {}
    train_files = data_section.get("train_files") or ()
    if isinstance(train_files, str):
        train_files = (train_files,)
    paths = check_files(files or tuple(train_files))
    tokenizer = _tokenizer(raw.get("actor") or {})
    from hfsdk.core.data.prompt_dataset import plain_rendering_reported

    plain_rendering_reported(tokenizer)  # the report's "rendering:" line says it once
    report = inspect_dataset(paths, tokenizer, data_section, raw.get("reward"))
    click.echo(report.format())


def _tokenizer(actor: dict) -> object:
    """The actor's tokenizer (tokenizer_path, else model_path), else the default task's."""
    from hfsdk.core.data.tokenizer_loading import load_tokenizer

    path = actor.get("tokenizer_path") or actor.get("model_path")
    if path:
        return load_tokenizer(str(path))
    from hfsdk.core.tasks import default_task_assets

    return load_tokenizer(str(default_task_assets().tokenizer_dir))
