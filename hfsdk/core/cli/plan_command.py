"""``hfsdk plan``: the auto-mapping planner's placement and layouts for an algorithm."""

from __future__ import annotations

import click

from hfsdk.core.errors import HfsdkError


def _parse_role_sizes(values: tuple[str, ...]) -> dict[str, str]:
    """``("critic=7B", "reward=1.3B")`` -> ``{"critic": "7B", "reward": "1.3B"}``."""
    sizes = {}
    for value in values:
        role, sep, size = value.partition("=")
        if not sep or not role.strip() or not size.strip():
            raise HfsdkError(f"--role-size expects ROLE=SIZE (e.g. critic=7B), got {value!r}")
        sizes[role.strip()] = size.strip()
    return sizes


@click.command(name="plan")
@click.option("--algo", required=True, help="Algorithm name (hfsdk list algorithms).")
@click.option(
    "--model-size",
    default="7B",
    show_default=True,
    help="Size of every role's model: 7B/13B/34B/70B, a parameter count (1.3B, 350M) or a "
    "path to an HF config.json.",
)
@click.option(
    "--role-size",
    "role_sizes",
    multiple=True,
    metavar="ROLE=SIZE",
    help="Another size for one role, e.g. --role-size reward=7B (repeatable).",
)
@click.option(
    "--gpus",
    "--devices",
    "devices",
    type=int,
    default=None,
    help="Devices to plan for [default: one node of the cluster preset; all cores for local].",
)
@click.option(
    "--cluster",
    default="a100-80gb",
    show_default=True,
    help="Cluster preset: a100-80gb or local (this machine's CPU cores).",
)
@click.option("--batch-size", type=int, default=1024, show_default=True, help="Prompts per step.")
@click.option("--samples-per-prompt", type=int, default=1, show_default=True)
@click.option("--prompt-length", type=int, default=1024, show_default=True)
@click.option("--response-length", type=int, default=1024, show_default=True)
@click.option(
    "--optimizer-steps",
    type=int,
    default=8,
    show_default=True,
    help="Mini-batch updates per iteration.",
)
@click.option(
    "--micro-batch-size",
    type=int,
    default=2,
    show_default=True,
    help="Sequences per forward/backward micro-batch.",
)
@click.option(
    "--max-running-sequences",
    type=int,
    default=256,
    show_default=True,
    help="Most sequences a rollout replica decodes at once.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON instead of a table.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also save the plan (JSON for .json, YAML otherwise).",
)
@click.option(
    "--timeline",
    type=click.Path(dir_okay=False),
    default=None,
    help="Draw the execution timeline per pool and stage to this image (e.g. plan.png).",
)
@click.option("--no-cache", is_flag=True, help="Simulate every lookup again (for comparison).")
def plan(
    algo: str,
    model_size: str,
    role_sizes: tuple[str, ...],
    devices: int | None,
    cluster: str,
    batch_size: int,
    samples_per_prompt: int,
    prompt_length: int,
    response_length: int,
    optimizer_steps: int,
    micro_batch_size: int,
    max_running_sequences: int,
    as_json: bool,
    output: str | None,
    timeline: str | None,
    no_cache: bool,
) -> None:
    """Find the fastest placement of an algorithm's roles and their parallel layouts.

    Searches every way to colocate the roles, every split of the devices
    between the groups and each role's (pipeline, tensor, data) layout with a
    latency simulator, and prints the fastest mapping with its estimated
    stage and iteration times. Example:

    \b
        hfsdk plan --algo ALGO --model-size 70B --gpus 128 --timeline plan.png
    """
    from hfsdk.core.placement import Workload, plan_for_algorithm

    workload = Workload(
        batch_size=batch_size,
        samples_per_prompt=samples_per_prompt,
        prompt_length=prompt_length,
        response_length=response_length,
        optimizer_steps=optimizer_steps,
        micro_batch_size=micro_batch_size,
        max_running_sequences=max_running_sequences,
    )
    result = plan_for_algorithm(
        algo,
        model_size=model_size,
        role_sizes=_parse_role_sizes(role_sizes),
        num_devices=devices,
        cluster=cluster,
        workload=workload,
        use_cache=not no_cache,
    )
    click.echo(result.to_json() if as_json else result.format_table())
    if output:
        result.save(output)
        if not as_json:
            click.echo(f"plan saved to {output}")
    if timeline:
        from hfsdk.core.placement.timeline import draw_timeline

        draw_timeline(result, timeline)
        if not as_json:
            click.echo(f"timeline drawn to {timeline}")
