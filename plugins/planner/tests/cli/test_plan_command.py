"""``hfsdk plan``: table, JSON, saved plan, timeline, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hfsdk import HfsdkError
from hfsdk.core.cli.main import main
from hfsdk_planner import Plan
from hfsdk_planner.cli.plan_command import plan


def test_table() -> None:
    result = CliRunner().invoke(plan, ["--algo", "ppo", "--model-size", "70B", "--gpus", "128"])
    assert result.exit_code == 0, result.output
    assert "Plan for ppo: 4 roles on 128 x a100-80gb" in result.output
    for role in ("actor", "critic", "reference", "reward"):
        assert role in result.output
    assert "estimated iteration" in result.output
    assert "hit rate" in result.output


def test_json_and_saved_plan_and_timeline(tmp_path: Path) -> None:
    out = tmp_path / "plan.yaml"
    png = tmp_path / "plan.png"
    args = ["--algo", "safe_rlhf", "--model-size", "13B", "--gpus", "32", "--json"]
    result = CliRunner().invoke(plan, [*args, "--output", str(out), "--timeline", str(png)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["num_devices"] == 32
    assert set(data["placement"]["roles"]) == {
        "actor", "critic", "cost_critic", "reference", "reward", "cost"
    }  # fmt: skip
    saved = Plan.load(out)
    assert saved.to_placement_section() == data["placement"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_outputs_in_new_folders_are_made_and_a_bad_image_suffix_refused_first(
    tmp_path: Path,
) -> None:
    args = ["--algo", "grpo", "--model-size", "0.5B"]
    out, png = tmp_path / "a" / "b" / "plan.yaml", tmp_path / "c" / "t.png"
    # Before: an internal FileNotFoundError after the plan was printed.
    result = CliRunner().invoke(plan, [*args, "--output", str(out), "--timeline", str(png)])
    assert result.exit_code == 0, result.output
    assert Plan.load(out).algorithm == "grpo" and png.read_bytes()[:4] == b"\x89PNG"
    result = CliRunner().invoke(plan, [*args, "--output", str(out), "--timeline", "t.xyz"])
    assert "draw to a file ending in one of .png" in str(result.exception)
    assert "estimated iteration" not in result.output  # refused before the search


def test_workload_and_role_size_options() -> None:
    result = CliRunner().invoke(
        plan,
        ["--algo", "grpo", "--model-size", "7B", "--role-size", "reward=1.3B", "--gpus", "8",
         "--batch-size", "128", "--samples-per-prompt", "4", "--response-length", "512",
         "--json", "--no-cache"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["workload"]["batch_size"] == 128
    assert data["workload"]["samples_per_prompt"] == 4
    models = {role["role"]: role["model"] for role in data["roles"]}
    assert models == {"actor": "7B", "reference": "7B", "reward": "1.3B"}
    assert data["stats"]["cache"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algo", "ppo", "--model-size", "70B", "--gpus", "2"], "at least 35 devices"),
        (["--algo", "ppx"], "did you mean 'ppo'"),
        (["--algo", "ppo", "--gpus", "20"], "multiple of 8"),
        (["--algo", "ppo", "--role-size", "critic"], "ROLE=SIZE"),
        (["--algo", "ppo", "--cluster", "tpu"], "unknown cluster preset"),
    ],
)
def test_errors_are_one_line_with_status_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = CliRunner().invoke(plan, args)
    assert isinstance(result.exception, HfsdkError)
    assert message in str(result.exception)
    with pytest.raises(SystemExit) as info:
        main(["plan", *args])
    _, err = capsys.readouterr()
    assert info.value.code == 2
    assert err.startswith("Error: ") and message in err and "Traceback" not in err


def test_listed_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "plan" in capsys.readouterr().out


def test_plan_prices_lora_recompute_and_packing() -> None:
    import json

    def actor_peak(*extra: str) -> tuple[float, dict]:
        args = ["--algo", "grpo", "--model-size", "7B", "--gpus", "8", "--json", *extra]
        result = CliRunner().invoke(plan, args)
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        actor = next(r for r in data["roles"] if r["role"] == "actor")
        layout = actor["layout"]
        # Per model replica: the layouts the search picks may differ between the settings.
        return actor["peak_memory_bytes"] * layout["p"] * layout["t"], data["workload"]

    full, _ = actor_peak()
    lora, workload = actor_peak("--lora-rank", "16")
    assert workload["lora_rank"] == 16
    assert (
        lora < 0.97 * full
    )  # base frozen: 4 instead of 16 bytes per parameter (KV cache dominates)
    _, workload = actor_peak("--no-recompute", "--packing-length", "700")
    assert workload["recompute"] is False and workload["packing"] is True
    assert workload["mean_sequence_length"] == 700


@pytest.mark.parametrize(("algo", "samples"), [("grpo", 4), ("ppo", 4), ("reward_model", 1)])
def test_samples_per_prompt_default_to_the_algorithms(algo: str, samples: int) -> None:
    # The run `hfsdk run --algo ALGO` would train: grpo's groups and ppo's preset draw 4.
    result = CliRunner().invoke(plan, ["--algo", algo, "--gpus", "8", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["workload"]["samples_per_prompt"] == samples
    given = CliRunner().invoke(
        plan, ["--algo", algo, "--gpus", "8", "--json", "--samples-per-prompt", "2"]
    )
    assert json.loads(given.output)["workload"]["samples_per_prompt"] == 2


def test_samples_per_prompt_read_from_the_algorithms_config() -> None:
    # grpo's own default (4) and the rollout's n both count; 4 x 1 here, the plan's table says so.
    result = CliRunner().invoke(plan, ["--algo", "grpo", "--gpus", "8"])
    assert result.exit_code == 0, result.output
    assert "1024 prompts x 4 samples" in result.output


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--packing-length", "-3"),
        ("--lora-rank", "-1"),
        ("--batch-size", "0"),
        ("--prompt-length", "0"),
        ("--response-length", "-5"),
        ("--optimizer-steps", "0"),
        ("--micro-batch-size", "0"),
        ("--max-running-sequences", "0"),
    ],
)
def test_out_of_range_workload_options_name_the_option(option: str, value: str) -> None:
    """Before: --packing-length -3 failed naming the internal mean_sequence_length."""
    result = CliRunner().invoke(plan, ["--algo", "grpo", option, value])
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.output
    assert "mean_sequence_length" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model-size", "foo"], "foo"),
        (["--role-size", "foo"], "ROLE=SIZE"),
        (["--role-size", "nope=7B"], "unknown roles ['nope']"),
        (["--role-size", "reward=foo"], "foo"),
        (["--gpus", "0"], "device count must be an integer >= 1"),
    ],
)
def test_bad_plan_arguments_stop_before_calibrate_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    from hfsdk_planner import calibrate as calibration

    def measure(**_kwargs: object) -> None:
        raise AssertionError("measured although plan_for_algorithm would refuse the arguments")

    monkeypatch.setattr(calibration, "calibrate", measure)
    profile = str(tmp_path / "p.yaml")
    # Before: minutes of measuring, then plan_for_algorithm refused the argument.
    result = CliRunner().invoke(plan, ["--algo", "grpo", "--calibrate", profile, *args])
    assert isinstance(result.exception, HfsdkError), result.exception
    assert message in str(result.exception)
    assert not Path(profile).exists()
