"""``math_verify`` in its worker process: a sample that computes for ever, references."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hfsdk_rewards import compute_rewards
from hfsdk_rewards.math_verify_reward import (
    _POOL,
    MathVerifyConfig,
    close_workers,
    math_verify,
)

# sympy evaluates this power tower inside C: no signal or asynchronous exception stops it.
FOR_EVER = r"the answer is \boxed{9^{9^{9^{9}}}}"


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_sample_that_computes_for_ever_times_out_and_the_batch_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = {
        "functions": [{"name": "math_verify", "kwargs": {"sample_timeout_s": 1}}],
        "timeout_s": 60,
    }
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="hfsdk_rewards.math_verify_reward"):
        scores, metrics = compute_rewards(
            ["q"] * 3, [FOR_EVER, r"\boxed{5}", r"\boxed{6}"], {"answer": ["5"] * 3}, config
        )
    assert scores == [0.0, 1.0, 0.0]  # the sample after the killed worker is still scored
    assert metrics["math_verify/timeout"] == pytest.approx(1 / 3)
    assert time.monotonic() - start < 30
    warnings = [r for r in caplog.records if "sample_timeout_s=1" in r.getMessage()]
    assert len(warnings) == 1 and "1 of 3 samples" in warnings[0].getMessage()


def test_close_workers_leaves_no_child_process() -> None:
    math_verify([""], [r"\boxed{2}"], answer=["2"])
    pids = [worker.process.pid for worker in _POOL.all]
    assert pids and all(_alive(pid) for pid in pids)
    close_workers()
    assert not any(_alive(pid) for pid in pids)
    # The next call starts a fresh worker.
    assert math_verify([""], [r"\boxed{2}"], answer=["2"])[0]["score"] == 1.0


def test_an_idle_worker_ends_when_its_parent_dies_without_cleaning_up() -> None:
    script = (
        "import os\n"
        "from hfsdk_rewards.math_verify_reward import _POOL, math_verify\n"
        "math_verify([''], [r'\\boxed{2}'], answer=['2'])\n"
        "print(*[w.process.pid for w in _POOL.all], flush=True)\n"
        "os._exit(0)\n"  # no atexit: the worker must notice on its own
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    pids = [int(p) for p in out.stdout.split()]
    assert pids
    end = time.monotonic() + 20
    while any(_alive(pid) for pid in pids) and time.monotonic() < end:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


def test_an_escaped_dollar_in_the_reference_is_text_not_math_mode() -> None:
    out = math_verify(["", "", ""], [r"\boxed{18.90}", r"\boxed{\$18.90}", r"\boxed{18.80}"],
                      answer=[r"\$18.90"] * 3)  # fmt: skip
    assert [r["score"] for r in out] == [1.0, 1.0, 0.0]
    assert [r["gold_unparsed"] for r in out] == [0.0, 0.0, 0.0]
    # References in math mode or boxed are read as they are.
    out = math_verify(["", ""], [r"\boxed{-2}", r"\boxed{6}"], answer=["$-2$", r"\boxed{6}"])
    assert [r["score"] for r in out] == [1.0, 1.0]


def test_a_reference_that_does_not_parse_is_counted_and_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="hfsdk_rewards.math_verify_reward"):
        out = math_verify(["", ""], [r"\boxed{4}", r"\boxed{4}"], answer=[r"\text{}", "4"])
    assert [r["gold_unparsed"] for r in out] == [1.0, 0.0]
    assert [r["score"] for r in out] == [0.0, 1.0]
    assert any("1 of 2 reference answers" in r.getMessage() for r in caplog.records)


def test_strict_makes_variable_names_in_relations_matter() -> None:
    pairs = [(r"\boxed{x=1}", "1"), (r"\boxed{1}", "x=1"), (r"\boxed{y=1}", "x=1")]
    responses, refs = [p[0] for p in pairs], [p[1] for p in pairs]
    for strict, expected in ((True, [1.0, 1.0, 0.0]), (False, [1.0, 1.0, 1.0])):
        out = math_verify([""] * 3, responses, config=MathVerifyConfig(strict=strict),
                          answer=refs)  # fmt: skip
        assert [r["score"] for r in out] == expected, strict


def test_the_worker_runs_without_a_main_guard_in_the_callers_script(tmp_path: Path) -> None:
    # A script without `if __name__ == "__main__"` (multiprocessing's spawn would re-run it).
    script = tmp_path / "score.py"
    script.write_text(
        "from hfsdk_rewards.math_verify_reward import math_verify\n"
        "print(math_verify([''], [r'\\boxed{3}'], answer=['3'])[0]['score'])\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, check=True, env={**os.environ})  # fmt: skip
    assert out.stdout.split() == ["1.0"]


def test_no_reference_is_unparsed_and_a_list_reference_accepts_any_element() -> None:
    # A null reference was the text "None" (\boxed{None} scored 1), a list its repr.
    out = math_verify(["", "", "", ""], [r"\boxed{72}", r"\boxed{None}", r"\boxed{4}", "5"],
                      answer=[None, None, ["4", "four"], [3, "5"]])  # fmt: skip
    assert [r["score"] for r in out] == [0.0, 0.0, 1.0, 1.0]
    assert [r["gold_unparsed"] for r in out] == [1.0, 1.0, 0.0, 0.0]
    assert [r["answer_found"] for r in out] == [1.0, 1.0, 1.0, 1.0]


def test_a_float_reference_in_scientific_notation_is_read_as_its_value() -> None:
    # str(1e-05) is '1e-05', which math-verify does not read as a number: it always scored 0.
    import numpy as np

    responses = [r"\boxed{0.00001}", r"\boxed{10000000000000000}", r"\boxed{0.00001}",
                 r"\boxed{0.5}", r"\boxed{3}", r"\boxed{0.00001}"]  # fmt: skip
    references = [1e-05, 1e16, [2.0, 1e-05], 0.5, 3.0, np.float32(1e-05)]
    out = math_verify([""] * 6, responses, answer=references)
    assert [r["score"] for r in out] == [1.0] * 6
    assert [r["gold_unparsed"] for r in out] == [0.0] * 6


def test_a_worker_that_cannot_import_math_verify_names_the_import_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The worker printed a raw traceback and the error said "did not start within 120 s".
    from hfsdk.core.errors import HfsdkError
    from hfsdk_rewards.math_verify_reward import _Worker

    shadow = tmp_path / "math_verify"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("No module named sympy")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    start = time.monotonic()
    with pytest.raises(HfsdkError) as caught:
        _Worker().wait_ready()
    assert time.monotonic() - start < 30
    line = str(caught.value)
    assert "\n" not in line
    assert "could not import math-verify (ImportError: No module named sympy)" in line, line
    assert "Traceback" not in capfd.readouterr().err


def test_samples_past_the_reward_deadline_score_as_timeouts_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    math_verify([""], [r"\boxed{2}"], answer=["2"])  # a warm worker: its start is not timed
    config = {
        "functions": [{"name": "math_verify", "kwargs": {"sample_timeout_s": 1}}],
        "timeout_s": 2.5,
    }
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="hfsdk_rewards.math_verify_reward"):
        scores, metrics = compute_rewards(
            ["q"] * 6, [FOR_EVER] * 5 + [r"\boxed{5}"], {"answer": ["5"] * 6}, config
        )
    # 5 samples of 1 s each (plus fresh workers) do not fit in 2.5 s: the rest are not
    # asked, score as timeouts, and the call returns instead of failing the run.
    assert scores == [0.0] * 6
    assert metrics["math_verify/timeout"] == 1.0
    assert 0 < metrics["math_verify/skipped"] < 1
    assert time.monotonic() - start < 10
    assert any("reward.timeout_s" in r.getMessage() for r in caplog.records)


def _slow_or_dead_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """Make the pool start workers from a script whose first lines are ``body``."""
    from hfsdk_rewards import math_verify_reward

    real = Path(math_verify_reward.__file__).with_name("_math_worker.py")
    script = tmp_path / "worker.py"
    script.write_text(f"{body}\nimport runpy\nrunpy.run_path({str(real)!r}, run_name='__main__')\n")
    close_workers()  # no warm worker: the next call starts one from the script
    monkeypatch.setattr(math_verify_reward, "_WORKER_SCRIPT", script)


def test_a_worker_slower_to_start_than_the_deadline_costs_only_the_first_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Killed when the call's budget ran out, the worker never reached the pool: every call
    # started a fresh one, and every batch of the run was skipped (scored 0).
    _slow_or_dead_worker(tmp_path, monkeypatch, "import time; time.sleep(1.0)")
    config = {"functions": [{"name": "math_verify"}], "timeout_s": 1.0}
    try:
        skipped = []
        for _ in range(4):
            scores, metrics = compute_rewards(["q"], [r"\boxed{2}"], {"answer": ["2"]}, config)
            skipped.append(metrics["math_verify/skipped"])
            if scores == [1.0]:
                break
            time.sleep(0.5)
        assert skipped[0] == 1.0  # the first call has no worker ready in its 0.5 s
        assert scores == [1.0], skipped  # the worker went on starting and a later call used it
    finally:
        close_workers()


def test_a_worker_that_exits_at_start_is_an_error_not_a_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under a deadline its exit read as "out of time": every batch skipped, no error.
    from hfsdk.core.errors import HfsdkError
    from hfsdk_rewards.calling import _call_deadline

    _slow_or_dead_worker(tmp_path, monkeypatch, "import sys; sys.exit(3)")
    try:
        with pytest.raises(HfsdkError) as caught, _call_deadline(60, "reward function"):
            math_verify([""], [r"\boxed{2}"], answer=["2"])
        line = str(caught.value)
        assert "worker process" in line and "exited" in line and "math-verify" in line, line
    finally:
        close_workers()


def test_a_sample_cut_short_by_the_deadline_keeps_its_worker_for_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sample cut short by the call's budget (not by sample_timeout_s) killed its worker,
    # and the next call, paying a fresh start, was skipped too: a cycle that scored nothing.
    slow_parse = (
        "import time, math_verify\n"
        "_parse = math_verify.parse\n"
        "def _slow(text, **kw):\n"
        "    if 'SLOW' in text:\n"
        "        time.sleep(0.8)\n"
        "    return _parse(text, **kw)\n"
        "math_verify.parse = _slow"
    )
    _slow_or_dead_worker(tmp_path, monkeypatch, slow_parse)
    try:
        math_verify([""], [r"\boxed{2}"], answer=["2"])  # a warm worker
        pids = {worker.process.pid for worker in _POOL.all}
        config = {"functions": [{"name": "math_verify"}], "timeout_s": 1.0}
        batch = ["q"] * 2, [r"SLOW \boxed{2}", r"\boxed{2}"], {"answer": ["2"] * 2}
        scores, metrics = compute_rewards(*batch, config)
        assert metrics["math_verify/skipped"] == 1.0  # both: the first ran past 0.5 s
        time.sleep(0.5)  # the worker finishes the cut-short sample
        scores, _ = compute_rewards(["q"], [r"\boxed{2}"], {"answer": ["2"]}, config)
        assert scores == [1.0]
        assert {worker.process.pid for worker in _POOL.all} == pids  # not restarted
    finally:
        close_workers()
