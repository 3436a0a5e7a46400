"""``hfsdk plan``: the auto-mapping planner's placement and layouts for an algorithm."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from hfsdk import HfsdkError

if TYPE_CHECKING:
    from hfsdk_planner import Workload
    from hfsdk_planner.plan import Plan


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
@click.option(
    "--algo", default=None, help="Algorithm name (hfsdk list algorithms); not with --check."
)
@click.option(
    "--model-size",
    default="7B",
    show_default=True,
    help="Size of every role's model: 7B/13B/34B/70B, a parameter count (1.3B, 350M) or a "
    "path to an HF config.json (or model directory).",
)
@click.option(
    "--role-size",
    "role_sizes",
    multiple=True,
    metavar="ROLE=SIZE",
    help="Another size for one role, e.g. --role-size reward=7B (repeatable); "
    "reward=function: a rule-based signal with no model (no device time).",
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
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Intra-op threads per device on a CPU profile (trainer.worker_threads) [default: "
    "what a run on these devices uses: the cores shared among them].",
)
@click.option(
    "--cluster",
    default=None,
    help="Cluster preset (hfsdk list clusters: a100-80gb, h100-80gb, h200-141gb, local) or a "
    "profile YAML from hfsdk calibrate [default: a100-80gb; with --check: the run's "
    "placement.cluster].",
)
@click.option(
    "--calibrate",
    "calibrate_to",
    type=click.Path(dir_okay=False),
    default=None,
    help="First measure this machine (hfsdk calibrate), save the profile to this YAML and "
    "plan on it.",
)
@click.option(
    "--check",
    "check_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Re-plan a finished run (its config.yaml and metrics.jsonl) and print predicted vs "
    "measured seconds per stage; --output and --timeline save and draw that plan. The "
    "model, device and workload options come from the run and are refused.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Prompts per step.",
)
@click.option(
    "--samples-per-prompt",
    type=click.IntRange(min=1),
    default=None,
    help="Responses per prompt [default: the algorithm's, as hfsdk run --algo ALGO samples: "
    "algorithm.n_samples_per_prompt x rollout.n].",
)
@click.option("--prompt-length", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--response-length", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option(
    "--optimizer-steps",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Mini-batch updates per iteration.",
)
@click.option(
    "--micro-batch-size",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Sequences per forward/backward micro-batch.",
)
@click.option(
    "--max-running-sequences",
    type=click.IntRange(min=1),
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
@click.option(
    "--lora-rank",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The policy trains LoRA adapters of this rank (frozen base; 0: full fine-tuning).",
)
@click.option(
    "--recompute/--no-recompute",
    default=True,
    show_default=True,
    help="Training recomputes activations (gradient checkpointing).",
)
@click.option(
    "--packing-length",
    type=click.IntRange(min=0),
    default=0,
    help="Passes pack their rows: activations cover this mean sequence length (prompt + "
    "response tokens) instead of the padded one [default: 0, no packing].",
)
@click.option("--no-cache", is_flag=True, help="Simulate every lookup again (for comparison).")
def plan(
    algo: str | None,
    model_size: str,
    role_sizes: tuple[str, ...],
    devices: int | None,
    threads: int | None,
    cluster: str | None,
    calibrate_to: str | None,
    check_dir: str | None,
    batch_size: int,
    samples_per_prompt: int | None,
    prompt_length: int,
    response_length: int,
    optimizer_steps: int,
    micro_batch_size: int,
    max_running_sequences: int,
    as_json: bool,
    output: str | None,
    timeline: str | None,
    lora_rank: int,
    recompute: bool,
    packing_length: int,
    no_cache: bool,
) -> None:
    """Find the fastest placement of an algorithm's roles and their parallel layouts.

    Searches every way to colocate the roles, every split of the devices
    between the groups and each role's (pipeline, tensor, data) layout with a
    latency simulator, and prints the fastest mapping with its estimated
    stage and iteration times. Example:

    \b
        hfsdk plan --algo ALGO --model-size 70B --gpus 128 --timeline plan.png
        hfsdk plan --check runs/my-run --cluster local.yaml
    """
    from hfsdk_planner import Workload, plan_for_algorithm

    # Every argument the measured profile does not decide is checked before --calibrate
    # spends minutes measuring (_check_plan_arguments).
    if timeline:
        from hfsdk_planner.timeline import check_image_path

        check_image_path(timeline)
        _check_writable(timeline, "the timeline", "plan.png")
    if output:
        _check_writable(output, "the plan", "plan.yaml")
    if check_dir and algo:
        raise HfsdkError("--check re-plans the run's own algorithm; drop --algo")
    if not check_dir and not algo:
        raise HfsdkError("hfsdk plan needs --algo ALGO (hfsdk list algorithms) or --check RUN_DIR")
    if calibrate_to and cluster:
        raise HfsdkError("--calibrate plans on the profile it measures; drop --cluster")
    if check_dir:
        from hfsdk_planner.run_plan import check_run, format_check, read_run

        _refuse_ignored_by_check()
        config, _rows = read_run(Path(check_dir))
        _check_sections(config, check_dir)
        if calibrate_to:
            cluster = _calibrate(calibrate_to, quick=False)
        result, table = check_run(check_dir, cluster)
        if as_json:
            import json

            rows = [
                {
                    "stage": r.name,
                    "predicted_s": r.predicted,
                    "measured_s": r.measured,
                    "flops_per_s": r.flops_per_s,
                    "mfu": r.mfu,
                    "bytes_per_s": r.bytes_per_s,
                    "bandwidth_util": r.bandwidth_util,
                }
                for r in table
            ]
            click.echo(json.dumps({"plan": result.to_dict(), "check": rows}, indent=2))
        else:
            click.echo(format_check(result, table, check_dir))
        _write_outputs(result, output, timeline, quiet=as_json)
        return
    assert algo is not None
    if samples_per_prompt is None:
        from hfsdk_planner.run_defaults import default_samples_per_prompt

        samples_per_prompt = default_samples_per_prompt(algo)
    workload = Workload(
        batch_size=batch_size,
        samples_per_prompt=samples_per_prompt,
        prompt_length=prompt_length,
        response_length=response_length,
        optimizer_steps=optimizer_steps,
        micro_batch_size=micro_batch_size,
        max_running_sequences=max_running_sequences,
        lora_rank=lora_rank,
        recompute=recompute,
        packing=packing_length > 0,
        mean_sequence_length=packing_length,
    )
    sizes = _parse_role_sizes(role_sizes)
    if calibrate_to:
        _check_plan_arguments(algo, model_size, sizes, devices, workload)
        cluster = _calibrate(calibrate_to, quick=False)
    result = plan_for_algorithm(
        algo,
        model_size=model_size,
        role_sizes=sizes,
        num_devices=devices,
        cluster=cluster or "a100-80gb",
        workload=workload,
        use_cache=not no_cache,
        threads=threads,
    )
    click.echo(result.to_json() if as_json else result.format_table())
    _write_outputs(result, output, timeline, quiet=as_json)


def _check_plan_arguments(
    algo: str,
    model_size: str,
    role_sizes: dict[str, str],
    devices: int | None,
    workload: Workload,
) -> None:
    """Refuse, before --calibrate measures for minutes, what :func:`plan_for_algorithm`
    would refuse after it: the roles and model sizes (each resolved) and the device count.

    Runs the planner's own checks on a stand-in profile (``local``) rather than a copy of
    them: :class:`PlacementSearch` resolves every role's model and names unknown roles
    without searching, and :meth:`Cluster.with_devices` checks the count. Not checked
    here, as they depend on the profile being measured: whether ``--gpus`` fills a GPU
    profile's nodes, ``--threads`` on a GPU profile, and a non-signal role given
    ``function`` (that rule lives inside plan_for_algorithm)."""
    from hfsdk_planner.auto import FUNCTION, algorithm_dataflow, without_roles
    from hfsdk_planner.cluster_lookup import get_cluster
    from hfsdk_planner.search import PlacementSearch

    stand_in = get_cluster("local")
    if devices is not None:
        stand_in = stand_in.with_devices(devices)
    dataflow = algorithm_dataflow(algo)
    # Roles scored by functions have no model to resolve; plan_for_algorithm drops them too.
    functions = {
        role for role in dataflow.roles if role_sizes.get(role, model_size).strip() == FUNCTION
    }
    models = {
        role: role_sizes.get(role, model_size) for role in dataflow.roles if role not in functions
    }
    models.update({role: size for role, size in role_sizes.items() if role not in dataflow.roles})
    if not models:  # every role a function: plan_for_algorithm names the non-signals
        return
    PlacementSearch(without_roles(dataflow, functions), models, stand_in, workload, algorithm=algo)


def _write_outputs(result: Plan, output: str | None, timeline: str | None, quiet: bool) -> None:
    """Save the plan to ``output`` and draw its timeline to ``timeline`` (each when given);
    ``quiet`` (--json) keeps stdout to the JSON alone."""
    if output:
        _save_plan(result, output)
        if not quiet:
            click.echo(f"plan saved to {output}")
    if timeline:
        from hfsdk_planner.timeline import draw_timeline

        draw_timeline(result, timeline)
        if not quiet:
            click.echo(f"timeline drawn to {timeline}")


CHECK_IGNORES = (
    "model_size",
    "role_sizes",
    "devices",
    "threads",
    "batch_size",
    "samples_per_prompt",
    "prompt_length",
    "response_length",
    "optimizer_steps",
    "micro_batch_size",
    "max_running_sequences",
    "lora_rank",
    "recompute",
    "packing_length",
    "no_cache",
)
"""The options of an --algo plan that --check does not read: it re-plans the run's own
models, devices, threads (as logged) and workload (as measured) from its directory."""


def _refuse_ignored_by_check() -> None:
    """A one-line error naming the workload options given with --check, which it would
    otherwise ignore without a word."""
    context = click.get_current_context()
    given = [
        "/".join((*param.opts, *param.secondary_opts))
        for param in context.command.params
        if param.name in CHECK_IGNORES
        and context.get_parameter_source(param.name) is not ParameterSource.DEFAULT
    ]
    if given:
        raise HfsdkError(
            f"--check re-plans the run's own models, devices and workload from its directory; "
            f"drop {', '.join(given)} (they apply to --algo plans)"
        )


def _check_sections(config: dict[str, Any], check_dir: str) -> None:
    """One line when a section of the run's config.yaml is not a mapping (``actor: [1, 2]``):
    the planner reads each role's keys from it, and a run writes every section as one."""
    for name, section in config.items():
        if name != "algo" and section is not None and not isinstance(section, dict):
            raise HfsdkError(
                f"--check {check_dir!r}: config.yaml's section {name!r} is a "
                f"{type(section).__name__} ({section!r}), expected a mapping of keys to values; "
                "fix it or give the directory of a run hfsdk wrote"
            )


def _check_writable(path: str, what: str = "the profile", example: str = "local.yaml") -> None:
    """Stop before the search (and minutes of measuring) when ``what`` could not be saved
    to ``path``."""
    target = Path(path).expanduser()
    if not path.strip() or target.is_dir() or (target.exists() and not target.is_file()):
        # The save renames a new file over the path: never over a device or a FIFO.
        raise HfsdkError(
            f"cannot save {what} to {path!r}: not a regular file's path; give one, e.g. {example}"
        )
    folder = target.absolute().parent
    while not folder.exists():  # the save makes the missing folders
        folder = folder.parent
    problem = _write_problem(folder)
    if problem:
        raise HfsdkError(
            f"cannot save {what} to {path!r}: {str(folder)!r} {problem}; give a path "
            "whose folders exist or can be made, and that you can write"
        )


def _write_problem(folder: Path) -> str | None:
    """Why no new file can be made in ``folder`` (None: one can), found by making one:
    permission bits do not bind root, and ``/proc`` takes no new file whatever they say."""
    if not folder.is_dir():
        return "is a file, not a folder"
    try:
        handle, probe = tempfile.mkstemp(prefix=".hfsdk-write-check-", dir=folder)
    except OSError as exc:
        return f"takes no new file ({exc.strerror or exc})"
    os.close(handle)
    os.unlink(probe)
    return None


def _save_plan(result: Plan, output: str) -> None:
    """Save the plan to ``output``; a folder that refuses it is a one-line error."""
    try:
        result.save(output)
    except OSError as exc:
        raise HfsdkError(
            f"cannot save the plan to {output!r}: {exc.strerror or exc}; give a path in a "
            "folder you can write"
        ) from None


def _calibrate(output: str, quick: bool) -> str:
    """Measure this machine, save the profile to ``output``; return its path."""
    from hfsdk_planner.calibrate import calibrate, format_calibration

    _check_writable(output)
    cluster, raw = calibrate(quick=quick, log=lambda msg: click.echo(msg, err=True))
    cluster.save(output)
    click.echo(format_calibration(cluster, raw))
    click.echo(f"profile saved to {output} (use --cluster {output} or placement.cluster)")
    return output


@click.command(name="calibrate")
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    default="cluster.yaml",
    show_default=True,
    help="Where to write the cluster profile (YAML).",
)
@click.option("--quick", is_flag=True, help="Tiny measurements in seconds (noisy; for tests).")
def calibrate_command(output: str, quick: bool) -> None:
    """Measure this machine for the planner and write a cluster profile.

    Matmul throughput per dtype, memory bandwidth, all-reduce bandwidth and
    latency between two local processes (gloo on CPU, NCCL between two GPUs),
    the hfsdk decoder's step time at a few batch sizes, the controller's cost
    per worker call, and the training backend's fixed work per update,
    micro-batch and inference pass (short runs of the default task, in
    process and on two worker processes), in a few minutes. On CPU each
    device is one core, measured at one thread, half the cores' and all the
    cores' worth: a run is priced at the threads its workers use
    (trainer.worker_threads; auto: the cores shared among its devices). Example:

    \b
        hfsdk calibrate --output local.yaml
        hfsdk plan --algo ALGO --cluster local.yaml --gpus 2 ...
    """
    _calibrate(output, quick)
