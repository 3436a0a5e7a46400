"""``hfsdk plot``: one PNG of a run's curves and stage times; clear errors otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hfsdk.core.cli.main import main
from hfsdk_planner.run_plot import draw_run, extra_panels, stage_times

ROWS = [
    {
        "step": 1,
        "reward/mean": 0.2,
        "actor/kl": 0.0,
        "response_length/mean": 3.0,
        "actor/pg_loss": 0.1,
        "timing/generation_s": 2.0,
        "timing/old_log_prob_s": 1.0,
        "timing/update_actor_s": 3.0,
        "timing/data_s": 0.01,
        "timing/step_s": 6.5,
    },
    {
        "step": 2,
        "reward/mean": 0.4,
        "actor/kl": 0.01,
        "response_length/mean": 2.5,
        "actor/pg_loss": -0.1,
        "timing/generation_s": 2.0,
        "timing/update_actor_s": 2.5,
        "timing/step_s": 4.4,
    },
]


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return run


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_stage_times_fill_missing_stages_and_the_rest_of_the_step() -> None:
    stages = stage_times(ROWS)
    assert list(stages) == ["generation", "old_log_prob", "update_actor", "other"]
    assert stages["old_log_prob"] == [1.0, 0.0]  # skipped in step 2
    assert stages["other"] == pytest.approx([0.5, 0.0])  # 4.4 < 4.5 is clamped to 0


def test_plot_writes_one_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_dir(tmp_path)
    code, out, _ = _hfsdk(capsys, "plot", str(run), "--out", str(tmp_path / "pic.png"))
    assert code == 0 and "2 steps" in out
    assert (tmp_path / "pic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, _ = _hfsdk(capsys, "plot", str(run))
    assert code == 0 and (run / "run.png").exists()
    assert not list(run.glob(".*tmp*"))  # written atomically, no leftovers


def test_a_nan_metric_is_a_gap_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path)
    rows = [{**ROWS[0], "actor/pg_loss": None, "timing/update_actor_s": None}, ROWS[1]]
    # How the trainer logs a NaN: null (before, float(None) stopped the plot).
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = _hfsdk(capsys, "plot", str(run))
    assert (code, err) == (0, "") and "2 steps" in out


def test_a_non_numeric_metric_is_skipped_with_one_warning_per_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hand-edited or merged log. Before: "ValueError: could not convert string to float:
    # 'abc' (internal error ...)"; now skipped as replay skips it, the rest drawn.
    run = _run_dir(tmp_path)
    rows = [
        {**ROWS[0], "actor/pg_loss": "abc", "timing/step_s": "abc"},
        {**ROWS[1], "actor/pg_loss": "abc", "actor/kl": "0.5"},  # a number as text is one
    ]
    path = run / "metrics.jsonl"
    # The damaged first line (read_metrics warns of it) still counts in the line numbers.
    path.write_text("not json\n" + "".join(json.dumps(r) + "\n" for r in rows))
    seen = _recorded(monkeypatch)
    code, out, err = _hfsdk(capsys, "plot", str(run))
    assert code == 0 and "2 steps" in out, err
    assert "internal error" not in err
    pg_loss = [line for line in err.splitlines() if "actor/pg_loss" in line]
    assert len(pg_loss) == 1, err  # once per key, not once per line
    assert f"{path} line 2: actor/pg_loss is 'abc', not a number; skipped" in pg_loss[0]
    assert "and on 1 later line" in pg_loss[0]
    step = [line for line in err.splitlines() if "timing/step_s" in line]
    assert len(step) == 1 and f"{path} line 2: timing/step_s is 'abc'" in step[0], err
    assert "actor/pg_loss" not in seen["lines"]
    assert {"reward/mean", "actor/kl", "response_length/mean"} <= set(seen["lines"])


def test_plot_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _hfsdk(capsys, "plot", str(tmp_path / "missing"))
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text("")
    code, _, err = _hfsdk(capsys, "plot", str(tmp_path / "empty"))
    assert code == 2 and "has no steps" in err
    run = _run_dir(tmp_path)
    code, _, err = _hfsdk(capsys, "plot", str(run), "--out", "x.pdf")
    assert code == 2 and "ending in .png" in err
    # A folder that takes no new file: before, matplotlib's FileNotFoundError as an internal error.
    code, _, err = _hfsdk(capsys, "plot", str(run), "--out", "/proc/run.png")
    assert code == 2 and "cannot write '/proc/run.png'" in err and "internal" not in err


def test_matplotlib_is_imported_only_by_the_plot_command() -> None:
    probe = "import sys, hfsdk.core.cli.main; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.stdout.strip() == "False"


def _recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Record what the drawing plots (curve labels) and stacks (bar label -> colour)."""
    import matplotlib.axes

    seen: dict[str, list] = {"lines": [], "bars": []}
    plot, bar = matplotlib.axes.Axes.plot, matplotlib.axes.Axes.bar

    def record_plot(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen["lines"].append(kwargs.get("label"))
        return plot(self, *args, **kwargs)

    def record_bar(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen["bars"].append((kwargs.get("label"), kwargs.get("color")))
        return bar(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", record_plot)
    monkeypatch.setattr(matplotlib.axes.Axes, "bar", record_bar)
    return seen


def test_a_plugins_own_metrics_are_drawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        {**row, "lagrange/multiplier": 0.5 * row["step"], "lagrange/violation": 0.1, "perf/x": 1}
        for row in ROWS
    ]
    # Namespaces the fixed panels draw (actor, reward) and counters (perf, timing) get none.
    assert extra_panels(rows) == [("lagrange/*", ("lagrange/multiplier", "lagrange/violation"))]
    assert extra_panels(ROWS) == []
    seen = _recorded(monkeypatch)
    draw_run(rows, tmp_path / "run.png")
    assert {"lagrange/multiplier", "lagrange/violation"} <= set(seen["lines"])
    assert "perf/x" not in seen["lines"]


def test_chosen_metrics_get_a_panel_and_a_bad_pattern_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run_dir(tmp_path)
    code, out, _ = _hfsdk(capsys, "plot", str(run), "--metric", "timing/gen*")
    assert code == 0, out
    assert extra_panels(ROWS, ["timing/gen*"]) == [("chosen metrics", ("timing/generation_s",))]
    code, _, err = _hfsdk(capsys, "plot", str(run), "--metric", "nope/*")
    assert code == 2 and "'nope/*' matches no metric" in err and "Traceback" not in err


def test_stage_colours_do_not_change_between_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _recorded(monkeypatch)
    draw_run(ROWS, tmp_path / "a.png")
    first = dict(seen["bars"])
    seen["bars"].clear()
    # Another run: no old-log-prob pass, a reward stage and a plugin's stage first.
    other = [
        {
            "step": 1,
            "timing/my_filter_s": 0.5,
            "timing/reward_s": 1.0,
            "timing/update_actor_s": 2.0,
            "timing/generation_s": 1.0,
            "timing/step_s": 5.0,
        },
    ]
    draw_run(other, tmp_path / "b.png")
    second = dict(seen["bars"])
    for stage in ("generation", "update_actor", "other"):
        assert first[stage] == second[stage] and first[stage] is not None
    assert second["my_filter"] is not None
    assert len(set(first.values())) == len(first)  # the stages of one run are told apart


def test_the_stages_utilisation_gets_its_panel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk_planner.run_plot import UTILISATION_PANEL

    shares = {
        "perf/update_actor_mfu": 0.4,
        "perf/generation_mfu": 0.05,
        "perf/generation_bandwidth_util": 0.3,
        "perf/update_actor_flops_per_s": 4e10,  # a rate, not a share: not in the panel
    }
    rows = [{**row, **shares} for row in ROWS]
    panels = dict(extra_panels(rows))
    assert set(panels[UTILISATION_PANEL]) == {
        "perf/update_actor_mfu",
        "perf/generation_mfu",
        "perf/generation_bandwidth_util",
    }
    assert UTILISATION_PANEL not in dict(extra_panels(ROWS))  # a run without them: no panel
    seen = _recorded(monkeypatch)
    draw_run(rows, tmp_path / "run.png")
    assert {"perf/update_actor_mfu", "perf/generation_bandwidth_util"} <= set(seen["lines"])


def test_every_validation_metric_is_drawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logged = {
        "val/pass@1": 0.4,
        "val/src/pass@2": 0.6,
        "val/src/pass@1": 0.5,
        "val/pairwise_accuracy": 0.7,  # a reward model's summary metric
        "val/margin_mean": 0.2,
        "val/src/reward_mean": 0.3,
    }
    rows = [{**row, **logged} for row in ROWS]
    seen = _recorded(monkeypatch)
    draw_run(rows, tmp_path / "run.png")
    assert set(logged) <= set(seen["lines"])
    from hfsdk_planner.run_plot import VALIDATION_PANEL, validation_estimators

    # A source's estimators sit beside the reward, in order of k; the rest get a panel.
    assert validation_estimators(rows) == ["val/pass@1", "val/src/pass@1", "val/src/pass@2"]
    assert dict(extra_panels(rows))[VALIDATION_PANEL] == (
        "val/pairwise_accuracy",
        "val/margin_mean",
        "val/src/reward_mean",
    )
    assert VALIDATION_PANEL not in dict(extra_panels(ROWS))  # none logged: no panel
    # Source names may hold "/" and "@" (an "@" in one raised ValueError).
    named = [{"step": 1, "val/openai/gsm8k/pass@1": 0.1, "val/team@x/pass@2": 0.2}]
    assert validation_estimators(named) == ["val/openai/gsm8k/pass@1", "val/team@x/pass@2"]


def test_plot_errors_name_the_argument_and_the_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hfsdk plot nope` said "pass a --run-dir" (plot takes RUN_DIR); an empty folder's
    metrics.jsonl "has no steps" though there was no such file."""
    missing = tmp_path / "missing"
    code, _, err = _hfsdk(capsys, "plot", str(missing))
    assert code == 2 and f"RUN_DIR {str(missing)!r} does not exist; pass the directory" in err
    assert "--run-dir" not in err
    # Before: an existing file "does not exist".
    afile = tmp_path / "empty.yaml"
    afile.write_text("")
    code, _, err = _hfsdk(capsys, "plot", str(afile))
    assert code == 2 and f"RUN_DIR {str(afile)!r} is a file, not a run directory" in err
    assert "does not exist" not in err
    (tmp_path / "empty").mkdir()
    code, _, err = _hfsdk(capsys, "plot", str(tmp_path / "empty"))
    assert code == 2 and f"{tmp_path / 'empty' / 'metrics.jsonl'} does not exist;" in err
