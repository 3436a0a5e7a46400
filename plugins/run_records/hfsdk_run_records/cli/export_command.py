"""``hfsdk export RUN_DIR [--step N] --out DIR``: a checkpoint in Hugging Face format."""

from __future__ import annotations

import click


@click.command(name="export")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--step", type=int, default=None, help="Checkpoint step (default: the newest).")
@click.option("--out", required=True, type=click.Path(), help="New directory to write.")
@click.option(
    "--role",
    "roles",
    multiple=True,
    help="Export only this role (repeatable); one role is written into --out itself.",
)
@click.option(
    "--lora-merged/--no-lora-merged",
    default=True,
    help="A LoRA policy: also write the merged model in merged/ (the adapter is always written).",
)
def export(
    run_dir: str, step: int | None, out: str, roles: tuple[str, ...], lora_merged: bool
) -> None:
    """Export a run's checkpoint (any backend) for AutoModelForCausalLM / AutoTokenizer.

    Every role with trained weights goes to OUT/<role> (the actor loads with
    AutoModelForCausalLM, a critic with its value-head class), with its tokenizer.
    """
    from hfsdk_run_records.export import export_checkpoint

    written = export_checkpoint(run_dir, out, step=step, roles=roles, lora_merged=lora_merged)
    for role, directory in written.items():
        click.echo(f"{role}: {directory}")
