"""``hfsdk plan --check``: --output and --timeline write the check's plan; the options it
does not read, and a config.yaml whose section is not a mapping, are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config
from hfsdk_planner.cli.plan_command import plan as plan_command

TIMINGS = {"generation": 0.012, "reshard": 0.002, "ref_log_prob": 0.011, "update_actor": 0.02}


def _run_dir(tmp_path: Path, config_text: str | None = None) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(config_text or load_run_config("grpo").to_yaml())
    rows = [
        {
            "step": step,
            "response_length/mean": 4.0,
            "timing/step_s": 0.05,
            **{f"timing/{k}_s": v for k, v in TIMINGS.items()},
        }
        for step in (1, 2)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_check_saves_the_plan_and_draws_the_timeline(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = _run_dir(tmp_path)
    saved, drawn = tmp_path / "chk.yaml", tmp_path / "chk.png"
    args = ["--check", str(run), "--cluster", "local", "--output", str(saved)]
    result = CliRunner().invoke(plan_command, [*args, "--timeline", str(drawn)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(saved.read_text())["algorithm"] == "grpo"
    assert drawn.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plan saved to {saved}" in result.output


def test_check_with_json_saves_json_and_prints_only_json(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    saved = tmp_path / "chk.json"
    args = ["--check", str(run), "--cluster", "local", "--json", "--output", str(saved)]
    result = CliRunner().invoke(plan_command, args)
    assert result.exit_code == 0, result.output
    assert json.loads(saved.read_text())["algorithm"] == "grpo"
    assert "check" in json.loads(result.output)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--threads", "2", "--batch-size", "5"], "--threads, --batch-size"),
        (["--devices", "3"], "--gpus/--devices"),
        (["--no-recompute"], "--recompute/--no-recompute"),
        (["--model-size", "1B"], "--model-size"),
    ],
)
def test_check_refuses_the_options_it_does_not_read(
    tmp_path: Path, extra: list[str], named: str
) -> None:
    run = _run_dir(tmp_path)
    saved = tmp_path / "chk.yaml"
    args = ["--check", str(run), "--cluster", "local", "--output", str(saved), *extra]
    result = CliRunner().invoke(plan_command, args)
    assert isinstance(result.exception, HfsdkError), result.output
    message = str(result.exception)
    assert f"drop {named} " in message and "\n" not in message
    assert not saved.exists()


def test_a_section_that_is_not_a_mapping_is_one_line(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, "algo: grpo\nactor: [1, 2]\n")
    result = CliRunner().invoke(plan_command, ["--check", str(run), "--cluster", "local"])
    assert isinstance(result.exception, HfsdkError), repr(result.exception)
    message = str(result.exception)
    assert "'actor' is a list" in message and "config.yaml" in message
    assert "\n" not in message


def test_the_cli_exits_2_on_a_bad_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hfsdk.core.cli.main import main

    run = _run_dir(tmp_path, "algo: grpo\nactor: [1, 2]\n")
    with pytest.raises(SystemExit) as info:
        main(["plan", "--check", str(run), "--cluster", "local"])
    assert info.value.code == 2
    assert "internal error" not in capsys.readouterr().err
