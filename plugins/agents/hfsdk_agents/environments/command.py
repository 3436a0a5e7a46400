"""``hfsdk reasoning-gym NAME DIR``: write a reasoning-gym task's prompts as a dataset."""

from __future__ import annotations

import json

import click

from hfsdk import ConfigError


@click.command("reasoning-gym")
@click.argument("name")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option(
    "--train-size", type=click.IntRange(min=1), default=1000, show_default=True,
    help="Training rows.",
)  # fmt: skip
@click.option(
    "--val-size", type=click.IntRange(min=1), default=100, show_default=True,
    help="Validation rows.",
)  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="The task's seed.")
@click.option(
    "--config",
    "config_json",
    default="{}",
    metavar="JSON",
    help="The task's config as a JSON object, e.g. '{\"max_terms\": 2}'.",
)
@click.option(
    "--format-instruction",
    default="default",
    show_default=True,
    metavar="NAME",
    help="reasoning-gym's system prompt put before each question (reasoning_gym.utils."
    "SYSTEM_PROMPTS; 'default' asks for <answer> tags), or 'none' for the bare question.",
)
def reasoning_gym_command(
    name: str,
    directory: str,
    train_size: int,
    val_size: int,
    seed: int,
    config_json: str,
    format_instruction: str,
) -> None:
    """Write DIR/train.jsonl and DIR/val.jsonl from the reasoning-gym task NAME (offline).

    Train on them with data.train_files=[DIR/train.jsonl] and reward.functions=
    [{name: reasoning_gym}] (the task's own verifier scores each response). Each prompt
    starts with the format instruction, so a model is told to answer in <answer> tags,
    the only answer the reward reads.
    """
    from hfsdk_agents.environments.reasoning_gym_data import write_reasoning_gym_data

    try:
        config = json.loads(config_json)
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"--config {config_json!r} is not JSON ({err.msg}); give an object"
        ) from None
    if not isinstance(config, dict):
        raise ConfigError(f"--config {config_json!r} is not a JSON object; give e.g. '{{}}'")
    train, val = write_reasoning_gym_data(
        name,
        directory,
        train_size=train_size,
        val_size=val_size,
        seed=seed,
        config=config,
        format_instruction=format_instruction,
    )
    click.echo(f"wrote {train} ({train_size} rows) and {val} ({val_size} rows)")
