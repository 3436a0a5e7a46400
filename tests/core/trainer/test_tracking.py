"""The core's metrics sinks: JSON lines per step, truncation on resume."""

from __future__ import annotations

import math
from pathlib import Path

from hfsdk.core.trainer.tracking import Tracker, read_metrics


def test_jsonl_lines_and_resume_truncation(tmp_path: Path) -> None:
    tracker = Tracker(tmp_path, ("jsonl",), total_steps=4)
    for step in (1, 2, 3):
        tracker.log(step, {"reward/mean": step / 10, "actor/kl": math.nan, "g": -math.inf})
    tracker.close()
    # Standard JSON on disk (NaN as null, inf as ±1e308), the floats again when read.
    assert "NaN" not in (tmp_path / "metrics.jsonl").read_text()
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[1]["reward/mean"] == 0.2 and math.isnan(rows[0]["actor/kl"])
    assert rows[0]["g"] == -math.inf

    # resuming from the step-2 checkpoint drops step 3, which will be redone
    tracker = Tracker(tmp_path, ("jsonl",), total_steps=4, start_step=2)
    tracker.log(3, {"reward/mean": 0.9})
    tracker.close()
    assert [(r["step"], r["reward/mean"]) for r in read_metrics(tmp_path)] == [
        (1, 0.1),
        (2, 0.2),
        (3, 0.9),
    ]
    assert "NaN" not in (tmp_path / "metrics.jsonl").read_text()  # the rewrite too


def test_console_only_writes_no_file(tmp_path: Path) -> None:
    tracker = Tracker(tmp_path, ("console",), total_steps=1, quiet=True)
    tracker.log(1, {"reward/mean": 1.0})
    tracker.close()
    assert not (tmp_path / "metrics.jsonl").exists()


def test_a_half_written_last_line_is_skipped_and_repaired(tmp_path: Path) -> None:
    tracker = Tracker(tmp_path, ("jsonl",), total_steps=4)
    for step in (1, 2):
        tracker.log(step, {"reward/mean": step / 10})
    tracker.close()
    path = tmp_path / "metrics.jsonl"
    path.write_text(path.read_text() + '{"step": 3, "reward/me')  # killed mid-write
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]
    # resuming from step 2 rewrites the file without the damaged line
    Tracker(tmp_path, ("jsonl",), total_steps=4, start_step=2).close()
    assert path.read_text().count("\n") == 2 and path.read_text().endswith("}\n")


def test_resume_leaves_one_line_per_step(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = [1, 2, 3, 2, 3, 4, 5]  # two runs on one directory (the old lock-less race)
    path.write_text("".join(f'{{"step": {s}, "x": {i}}}\n' for i, s in enumerate(lines)))
    Tracker(tmp_path, ("jsonl",), total_steps=9, start_step=4).close()
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["x"] for r in rows] == [0, 3, 4, 5]  # the last copy of a repeated step wins


def test_a_registered_sink_gets_every_step_and_the_samples(tmp_path: Path) -> None:
    calls: list[tuple] = []

    class Sink:
        def log(self, step: int, metrics: dict) -> None:
            calls.append(("log", step, metrics))

        def log_samples(self, step: int, samples: list) -> None:
            calls.append(("samples", step, len(samples)))

        def close(self) -> None:
            calls.append(("close",))

    def factory(*, run_dir: Path, config: object, start_step: int) -> Sink:
        calls.append(("open", run_dir, start_step))
        return Sink()

    class Entry:
        impl = staticmethod(factory)
        plugin = "fake_sinks"

    tracker = Tracker(tmp_path, ("jsonl", "fake"), total_steps=3, start_step=1,
                      trackers={"fake": Entry()})  # fmt: skip
    tracker.log(2, {"reward/mean": 1.0})
    tracker.log_samples(2, [{"prompt": "p", "response": "r", "score": 1.0}])
    tracker.log_samples(2, [])  # nothing to show: the sinks are not called
    tracker.close()
    assert calls == [
        ("open", tmp_path, 1), ("log", 2, {"reward/mean": 1.0}), ("samples", 2, 1), ("close",),
    ]  # fmt: skip


def test_a_default_plugins_logger_without_its_plugin_names_the_distribution() -> None:
    from hfsdk.core.trainer.tracking import logger_problems

    [line] = logger_problems(("jsonl", "tensorboard"), {})
    assert "trainer.loggers=tensorboard comes with hfsdk-plugin-tracking" in line
    [line] = logger_problems(("slack",), {"wandb": None})
    assert "unknown logger 'slack'" in line and "wandb" in line


def test_numpy_and_torch_numbers_are_written_and_a_failing_sink_is_named(tmp_path: Path) -> None:
    """A step observer's numpy float32 or 0-d tensor stopped the run as an internal error
    (not JSON serializable); a plugin sink that raises is named, with the step."""
    import numpy as np
    import pytest
    import torch

    from hfsdk.core.errors import HfsdkError

    class Down:
        def log(self, step: int, metrics: dict) -> None:
            raise ConnectionError("tracking server unreachable")

        def close(self) -> None:
            pass

    class Entry:
        impl = staticmethod(lambda **_: Down())
        plugin = "remote_sinks"

    tracker = Tracker(tmp_path, ("jsonl", "remote"), total_steps=2, trackers={"remote": Entry()})
    with pytest.raises(HfsdkError, match=r"'remote_sinks'.s logger 'remote' \(log step 1\)"):
        tracker.log(1, {"a": np.float32(0.25), "b": torch.tensor(2.0), "c": np.float32("nan")})
    tracker.close()
    [row] = read_metrics(tmp_path)
    assert row["a"] == 0.25 and row["b"] == 2.0 and math.isnan(row["c"])


def test_an_unknown_logger_names_the_plugins_that_failed_to_load() -> None:
    from hfsdk.core.registry import Registry
    from hfsdk.core.trainer.tracking import logger_problems

    trackers = Registry("trackers")
    trackers.explain_missing = lambda: "; plugin(s) that failed to load: broken (ImportError)"
    [line] = logger_problems(("halfway",), trackers)
    assert "unknown logger 'halfway'" in line and "failed to load: broken" in line


def test_a_rerun_without_a_checkpoint_does_not_repeat_step_0(tmp_path: Path) -> None:
    # The first run validated before training (step 0), trained step 1 and died unsaved;
    # the same command starts over and logs step 0 again.
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "x": 0}\n{"step": 1, "x": 1}\n')
    tracker = Tracker(tmp_path, ("jsonl",), total_steps=3, start_step=0)
    tracker.log(0, {"x": 2.0})
    tracker.close()
    assert [(r["step"], r["x"]) for r in read_metrics(tmp_path)] == [(0, 2.0)]


def test_a_sink_that_fails_to_start_leaves_nothing_open(tmp_path: Path) -> None:
    """A later sink's factory raising left metrics.jsonl, the bar and the sinks already built
    open, once per trainer.max_restarts retry (a tensorboard writer's thread each)."""
    import os

    import pytest
    from tqdm import tqdm

    from hfsdk.core.errors import HfsdkError

    closed: list[str] = []

    class Built:
        def close(self) -> None:
            closed.append("built")

    def down(**_: object) -> None:
        raise ConnectionError("tracking server down")

    class First:
        impl = staticmethod(lambda **_: Built())
        plugin = "first_sinks"

    class Second:
        impl = staticmethod(down)
        plugin = "down_sinks"

    bars = set(getattr(tqdm, "_instances", ()))
    with pytest.raises(HfsdkError, match=r"'down_sinks'.s logger 'down' \(start\) raised Conn"):
        Tracker(tmp_path, ("console", "jsonl", "first", "down"), total_steps=2,
                trackers={"first": First(), "down": Second()})  # fmt: skip
    assert closed == ["built"]
    assert set(getattr(tqdm, "_instances", ())) <= bars, "the progress bar was left open"
    fds = Path("/proc/self/fd")
    if fds.is_dir():  # Linux: no descriptor left on metrics.jsonl
        targets = [os.readlink(fd) for fd in fds.iterdir() if fd.is_symlink()]
        assert not [t for t in targets if t.endswith("metrics.jsonl")]
