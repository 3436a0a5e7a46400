"""``hfsdk replay`` and ``trainer.mode``: what a run dumped reproduces its steps exactly."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest
import torch

from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_run_records.replay import replay_steps
from hfsdk_run_records.step_dump import read_step_dump, step_dump_path
from hfsdk_testing import SMALL_GRPO

SMALL = [
    *SMALL_GRPO,
    "trainer.total_steps=3",
]
_TIMED = ("timing/", "perf/")


def _fit(run_dir: Path, *extra: str) -> list[dict]:
    config = load_run_config("grpo", None, [*SMALL, *extra])
    return Trainer(config, run_dir, quiet=True).fit()


def _untimed(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith(_TIMED)}


@pytest.fixture(scope="module")
def dumped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """A 3-step run with rollout_dump and a checkpoint at step 2 (and the last step)."""
    run_dir = tmp_path_factory.mktemp("dumped") / "run"
    rows = _fit(run_dir, "trainer.rollout_dump=true", "trainer.save_every=2")
    return run_dir, rows


@pytest.mark.slow
def test_replay_reproduces_the_logged_update_metrics_bit_for_bit(
    dumped: tuple[Path, list[dict]],
) -> None:
    run_dir, rows = dumped
    # Step 3: from checkpoint step_2, one update. Step 2: no checkpoint before it, so from
    # the starting weights through step 1's update (the state step 2 started from).
    for step, replayed_steps in ((3, [3]), (2, [1, 2])):
        results = replay_steps(run_dir, step)
        assert [r.step for r in results] == replayed_steps
        for result in results:
            assert {"actor/pg_loss", "actor/grad_norm", "actor/kl"} <= set(result.compared)
            assert result.differing == [], (step, result.step, result.differing)
            assert result.replayed["actor/grad_norm"] == rows[result.step - 1]["actor/grad_norm"]
    # The steps' numbers differ from each other, so equality above is not a coincidence.
    assert len({r["actor/grad_norm"] for r in rows}) == 3


@pytest.mark.slow
def test_replay_of_a_batch_that_is_not_what_the_update_saw_differs_and_exits_1(
    dumped: tuple[Path, list[dict]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = dumped
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    path = step_dump_path(copy, 3)
    state = torch.load(path, weights_only=False)
    state["update"]["advantages"] = state["update"]["advantages"] * 1.001
    torch.save(state, path)
    with pytest.raises(SystemExit) as info:
        main(["replay", str(copy), "--step", "3"])
    out = capsys.readouterr().out
    assert info.value.code == 1, out
    assert "DIFFERS" in out and "step 3:" in out and "differ" in out.splitlines()[-1]
    with pytest.raises(SystemExit) as info:
        main(["replay", str(run_dir), "--step", "3"])
    assert info.value.code == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("reproduced exactly")


@pytest.mark.slow
def test_replay_without_dumps_or_of_an_unlogged_step_says_so_in_one_line(
    dumped: tuple[Path, list[dict]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = dumped
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    step_dump_path(copy, 3).unlink()
    for args, says in (
        ([str(copy), "--step", "3"], "trainer.rollout_dump: true"),
        ([str(run_dir), "--step", "9"], "logged steps 1..3"),
        ([str(tmp_path), "--step", "1"], "is not a run directory"),
    ):
        with pytest.raises(SystemExit) as info:
            main(["replay", *args])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert info.value.code == 2 and len(lines) == 1 and says in lines[0], err
        assert "Traceback" not in err


def _damage_checkpoint(run_dir: Path, step: int) -> None:
    """Flip bytes in the middle of the step's largest checkpoint file (its size unchanged)."""
    files = [p for p in (run_dir / "checkpoints" / f"step_{step}").rglob("*") if p.is_file()]
    largest = max(files, key=lambda p: p.stat().st_size)
    data = bytearray(largest.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(255 - b for b in data[middle : middle + 64])
    largest.write_bytes(bytes(data))


def _strip_logged_metrics(run_dir: Path, step: int) -> None:
    """Keep only the step number and timings in the step's metrics line."""
    import json

    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        if row.get("step") == step:
            for key in [k for k in row if k != "step" and not k.startswith(_TIMED)]:
                del row[key]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.mark.slow
def test_replay_refuses_what_would_fake_a_verdict_in_one_line(
    dumped: tuple[Path, list[dict]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged checkpoint replayed as "9 metrics differ", a dump copied over another step's
    compared with the wrong step, and a log with nothing to compare "reproduced exactly"."""
    run_dir, _ = dumped
    cases = (
        (lambda copy: _damage_checkpoint(copy, 2), "checkpoint step_2 is damaged"),
        (
            lambda copy: shutil.copy(step_dump_path(copy, 2), step_dump_path(copy, 3)),
            "holds step 2, not 3",
        ),
        (lambda copy: _strip_logged_metrics(copy, 3), "none of the replayed metrics"),
    )
    for number, (spoil, says) in enumerate(cases):
        copy = tmp_path / f"copy{number}"
        shutil.copytree(run_dir, copy)
        spoil(copy)
        with pytest.raises(SystemExit) as info:
            main(["replay", str(copy), "--step", "3"])
        captured = capsys.readouterr()
        errors = [line for line in captured.err.splitlines() if line.startswith("Error")]
        assert info.value.code == 2 and len(errors) == 1 and says in errors[0], captured
        assert "Traceback" not in captured.err


@pytest.mark.slow
def test_train_only_on_a_runs_rollouts_trains_exactly_as_that_run_did(
    dumped: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    """The generations come from the dump; everything after them (log-probs, rewards,
    advantages, updates) runs again and lands on the same numbers, step after step."""
    run_dir, rows = dumped
    again = _fit(
        tmp_path / "train_only", "trainer.mode=train_only", f"trainer.rollouts_from={run_dir}"
    )
    assert [r["step"] for r in again] == [1, 2, 3]
    for a, b in zip(rows, again, strict=True):
        assert _untimed(a) == _untimed(b), a["step"]
    assert again[0]["timing/generation_s"] < 0.1  # nothing was generated


@pytest.mark.slow
def test_rollout_only_generates_and_scores_without_training(
    dumped: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    run_dir, rows = dumped
    out = tmp_path / "rollout_only"
    only = _fit(out, "trainer.mode=rollout_only")
    assert [r["step"] for r in only] == [1, 2, 3]
    assert not any(k.startswith("actor/") for r in only for k in r)
    assert all("reward/mean" in r and "response_length/mean" in r for r in only)
    # Step 1 samples with the starting weights in both runs: the same generations.
    mine, theirs = read_step_dump(out, 1, for_what="t"), read_step_dump(run_dir, 1, for_what="t")
    assert mine.update is None and theirs.update is not None
    for key in ("responses", "input_ids"):
        assert torch.equal(mine.generations[0][1][key], theirs.generations[0][1][key])
    assert only[0]["reward/mean"] == rows[0]["reward/mean"]
    assert (out / "rollouts" / "step_3.jsonl").is_file()
    with pytest.raises(HfsdkError, match="rollout_only and trained nothing"):
        replay_steps(out, 2)


@pytest.mark.slow
def test_train_only_settings_the_dump_does_not_fit_are_refused_before_the_run(
    dumped: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    """Another group size trained the dump's without a word (config.yaml said 1 sample); a
    correction on rollouts recorded without log-probs failed in the first update."""
    from hfsdk import get_registry
    from hfsdk_run_records.train_only_check import check_recorded_generations

    assert "recorded_generations" in get_registry("preflight_checks")
    run_dir, _ = dumped
    cases = (
        (["algorithm.n_samples_per_prompt=4"], "have 4 prompts x 2 samples a step, this run"),
        (["data.batch_size=2", "actor.mini_batch_size=2"], "data.batch_size=2 x"),
        (["rollout_correction.preset=tis", "rollout.backend=vllm"], "do not hold"),
    )
    for extra, says in cases:
        overrides = [*SMALL, "trainer.mode=train_only", f"trainer.rollouts_from={run_dir}", *extra]
        with pytest.raises(HfsdkError, match=says):
            check_recorded_generations(load_run_config("grpo", None, overrides))
    check_recorded_generations(load_run_config("grpo", None, overrides[:-2]))  # fits


def _fake_dumps(run_dir: Path, steps: int, draws: int = 0) -> Path:
    """``steps`` step dumps of ``draws`` placeholder draws of 4 prompts each (no draws: what
    an SFT run dumps; the length check only counts the files)."""
    for step in range(1, steps + 1):
        path = step_dump_path(run_dir, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        generations = [([f"{step}.{d}"] * 4, [f"generated {step}.{d}"]) for d in range(draws)]
        torch.save({"format": 1, "step": step, "generations": generations, "update": None}, path)
    return run_dir


def test_train_only_longer_than_the_dumped_run_is_refused_before_any_step(tmp_path: Path) -> None:
    """3 steps on 2 dumped ones trained steps 1-2, then failed (their work lost, the message
    blaming rollout_dump); a resumed run needs the dumps up to total_steps just the same."""
    source = _fake_dumps(tmp_path / "source", 2, draws=1)
    run_dir = tmp_path / "train_only"
    train_only = ["trainer.mode=train_only", f"trainer.rollouts_from={source}"]
    with pytest.raises(HfsdkError) as info:
        Trainer(load_run_config("grpo", None, [*SMALL, *train_only]), run_dir, quiet=True)
    line = str(info.value)
    assert "dumped 2 steps" in line and "trainer.total_steps=3" in line, line
    assert "lower trainer.total_steps to 2" in line and "\n" not in line, line
    assert not (run_dir / "metrics.jsonl").exists()


def test_train_only_past_the_dumped_steps_says_how_many_the_run_dumped(tmp_path: Path) -> None:
    from hfsdk_run_records.step_dump import DumpedGenerations

    source = DumpedGenerations(_fake_dumps(tmp_path, 2))
    source.load_state_dict({"step": 2})  # a resumed run at the end of the dump
    with pytest.raises(HfsdkError, match="dumped only 2 steps") as info:
        source.next_batch()
    assert "rollout_dump" not in str(info.value)


def test_train_only_that_leaves_dumped_draws_unused_is_refused(tmp_path: Path) -> None:
    """A DAPO dump (dynamic sampling: several draws a step) trained by GRPO (one draw) used
    each step's first draw and silently dropped the rest."""
    from hfsdk_run_records.step_dump import DumpedGenerations

    source = _fake_dumps(tmp_path, 2, draws=3)
    for end_step in (
        lambda generations: generations.step_done(),  # the step ends
        lambda generations: generations.next_batch(),  # or the next one begins
    ):
        generations = DumpedGenerations(source)
        assert generations.next_batch() == ["1.0"] * 4
        with pytest.raises(HfsdkError) as info:
            end_step(generations)
        line = str(info.value)
        assert "step 1 left 2 of the 3 draws" in line and "unused" in line, line
        assert "algorithm and sampling settings" in line and "\n" not in line, line
    generations = DumpedGenerations(source)  # every draw used: the step ends quietly
    for draw in range(3):
        assert generations.next_batch(None if draw == 0 else 4) == [f"1.{draw}"] * 4
    generations.step_done()


def test_train_only_from_a_run_that_sampled_nothing_is_refused_before_the_run(
    tmp_path: Path,
) -> None:
    """An SFT run's dumps hold no generations: train_only passed the preflight on them and
    failed at step 1 saying it "draws more prompts than the run did"."""
    from hfsdk_run_records.train_only_check import check_recorded_generations

    source = _fake_dumps(tmp_path / "sft", 3)
    overrides = [*SMALL, "trainer.mode=train_only", f"trainer.rollouts_from={source}"]
    with pytest.raises(HfsdkError) as info:
        check_recorded_generations(load_run_config("grpo", None, overrides))
    line = str(info.value)
    assert "sampled nothing" in line and "\n" not in line, line


def test_replay_of_a_directory_that_is_no_run_or_logged_no_step_says_so(tmp_path: Path) -> None:
    """``hfsdk replay`` takes RUN_DIR as an argument (there is no --run-dir), and a run that
    logged nothing was said to have "logged steps 1..0"."""
    with pytest.raises(HfsdkError, match=r"is not a run directory .*; pass the RUN_DIR of an"):
        replay_steps(tmp_path, 1)
    config = load_run_config("grpo", None, list(SMALL))
    (tmp_path / "config.yaml").write_text(config.to_yaml())
    for metrics in (None, ""):  # missing, empty
        if metrics is not None:
            (tmp_path / "metrics.jsonl").write_text(metrics)
        with pytest.raises(HfsdkError) as info:
            replay_steps(tmp_path, 1)
        line = str(info.value)
        assert "logged no steps (metrics.jsonl is missing or empty)" in line, line
        assert "1..0" not in line and "\n" not in line, line


@pytest.mark.slow
def test_replay_needs_neither_the_training_data_nor_a_train_only_runs_source(
    dumped: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    """Replay updates on the run's own dumps: it prepared the run in full before, tokenizing
    data.train_files and checking trainer.rollouts_from, and failed once either was gone."""
    from hfsdk.core.tasks import default_task_assets

    run_dir, _ = dumped
    source, data = tmp_path / "source", tmp_path / "train.jsonl"
    shutil.copytree(run_dir, source)
    shutil.copy(default_task_assets().train_files[0], data)
    trained = tmp_path / "train_only"
    _fit(
        trained,
        "trainer.total_steps=1",
        "trainer.rollout_dump=true",
        "trainer.mode=train_only",
        f"trainer.rollouts_from={source}",
        f"data.train_files=[{data}]",
        "reward.functions=[{name: default_task}]",
    )
    data.rename(tmp_path / "moved.jsonl")
    shutil.rmtree(source)
    (result,) = replay_steps(trained, 1)
    assert {"actor/pg_loss", "actor/grad_norm"} <= set(result.compared)
    assert result.differing == []


def test_modes_with_missing_or_conflicting_settings_are_refused_in_one_line() -> None:
    cases = (
        (["trainer.mode=train_only"], "needs trainer.rollouts_from"),
        (["trainer.rollouts_from=/x"], "other modes take no rollouts_from"),
        (["trainer.mode=rollout_only", "trainer.pipeline=one_step_off"], "pipeline: sync"),
    )
    for extra, says in cases:
        with pytest.raises(HfsdkError) as info:
            load_run_config("grpo", None, [*SMALL, *extra])
        assert says in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_train_only_from_a_directory_without_rollouts_is_refused(tmp_path: Path) -> None:
    from hfsdk_run_records.step_dump import DumpedGenerations

    with pytest.raises(HfsdkError, match="has no rollouts/ directory"):
        DumpedGenerations(tmp_path)


def test_a_dump_naming_a_foreign_type_is_refused_without_running_it(tmp_path: Path) -> None:
    """Dumps are read with weights_only and the checkpoints' allow-list: nothing executes."""
    path = step_dump_path(tmp_path, 1)
    path.parent.mkdir(parents=True)
    # A function reference no allow-list holds (megatron-core, once imported, adds some
    # plain data types such as PosixPath to torch's process-wide safe globals).
    torch.save({"format": 1, "step": 1, "generations": [], "update": os.getcwd}, path)
    with pytest.raises(HfsdkError, match="object hfsdk does not save"):
        read_step_dump(tmp_path, 1, for_what="t")


@pytest.mark.slow
def test_dpo_replays_exactly_and_a_score_model_run_is_refused(tmp_path: Path) -> None:
    dump = ["trainer.total_steps=2", "trainer.rollout_dump=true", "trainer.loggers=[jsonl]"]
    Trainer(load_run_config("dpo", None, dump), tmp_path / "dpo", quiet=True).fit()
    # Before: update_actor missed 'advantages' (the default replay skipped DPO's own view).
    results = replay_steps(tmp_path / "dpo", 2)
    assert [r.step for r in results] == [1, 2]
    for result in results:
        assert "actor/pg_loss" in result.compared and result.differing == []
    Trainer(load_run_config("reward_model", None, dump), tmp_path / "rm", quiet=True).fit()
    with pytest.raises(HfsdkError, match="trains no policy"):
        replay_steps(tmp_path / "rm", 2)


def _without_checkpoints(run_dir: Path, copy: Path, *steps: int) -> Path:
    shutil.copytree(run_dir, copy)
    for step in steps:
        shutil.rmtree(copy / "checkpoints" / f"step_{step}")
    return copy


# Heavy: replay across a resume stays quick under a constant schedule; only this case
# checks a schedule whose length changed (cosine) and its refusal.
@pytest.mark.heavy
@pytest.mark.slow
def test_replay_of_a_cosine_run_lengthened_on_resume_uses_the_length_each_step_trained_under(
    tmp_path: Path,
) -> None:
    """Steps 1-2 trained under a 2-step cosine, 3-4 under the 4-step one the resume wrote to
    config.yaml; replay rebuilt every step with 4 (step 2: actor/lr 8.5e-05, not 5e-05).
    Each run segment's length is in rollouts/segments.json."""
    run_dir = tmp_path / "run"
    cosine = ["actor.optim.lr_schedule=cosine", "trainer.rollout_dump=true", "trainer.save_every=1"]
    _fit(run_dir, *cosine, "trainer.total_steps=2")
    rows = _fit(run_dir, *cosine, "trainer.total_steps=4")
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    # Checkpoints 2 and 4, as without save_every: step 2 from the start, step 4 from the
    # checkpoint the run was resumed from.
    plain = _without_checkpoints(run_dir, tmp_path / "plain", 1, 3)
    for step, replayed_steps in ((2, [1, 2]), (4, [3, 4])):
        results = replay_steps(plain, step)
        assert [r.step for r in results] == replayed_steps
        for result in results:
            assert "actor/lr" in result.compared
            assert result.differing == [], (step, result.step, result.differing)
    # Only checkpoint 1 before step 4: steps 2 (2-step cosine) and 3-4 (4-step) in one replay.
    split = _without_checkpoints(run_dir, tmp_path / "split", 2, 3)
    says = "trainer.total_steps changed from 2 to 4 on resume at step 2, inside the steps to "
    with pytest.raises(HfsdkError, match=f"{says}replay from checkpoint step_1"):
        replay_steps(split, 4)
    assert [r.differing for r in replay_steps(split, 2)] == [[]]
    # Only the last checkpoint (keep_last: 1): steps 1-2 replay from the start under 2.
    last = _without_checkpoints(run_dir, tmp_path / "last", 1, 2, 3)
    assert [r.differing for r in replay_steps(last, 2)] == [[], []]
    with pytest.raises(HfsdkError, match=f"{says}replay from checkpoint the start"):
        replay_steps(last, 3)


@pytest.mark.slow
def test_replay_across_a_resume_that_changed_total_steps_under_a_constant_schedule(
    tmp_path: Path,
) -> None:
    """With constant learning rates (the default) the run length shapes no schedule: replay
    refused step 2 as "total_steps changed from 1 to 2" though it reproduces exactly."""
    run_dir = tmp_path / "run"
    _fit(run_dir, "trainer.rollout_dump=true", "trainer.total_steps=1")
    _fit(run_dir, "trainer.rollout_dump=true", "trainer.total_steps=2")
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("checkpoints"))
    results = replay_steps(copy, 2)
    assert [r.step for r in results] == [1, 2]
    assert [r.differing for r in results] == [[], []]
    assert all("actor/pg_loss" in r.compared for r in results)


class _Started(Exception):
    """Raised by the stand-in session: what the replay would start is recorded by then."""


def test_replay_starts_no_rollout_replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the run's whole config went to the session, which started the rollout pool's
    # replicas (and needed its devices) for updates that sample nothing.
    import hfsdk
    from hfsdk_run_records import replay

    pools = [
        "placement.pools={rollout: {devices: 2}, train: {devices: 1}}",
        "trainer.pipeline=async",
        "trainer.partial_rollout_tokens=4",
    ]
    run_config = load_run_config("grpo", None, [*SMALL, *pools])
    run_dir = _fake_dumps(tmp_path / "run", 1)
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "actor/pg_loss": 0.5}\n')
    started = []

    def session(config: object, spec: object, prepared: object) -> None:
        started.append(config)
        raise _Started

    monkeypatch.setattr(replay, "_run_config", lambda run_dir: run_config)
    monkeypatch.setattr(hfsdk, "prepare_run", lambda config, spec: None)  # data: not needed
    monkeypatch.setattr(hfsdk, "TrainingSession", session)
    with pytest.raises(_Started):
        replay_steps(run_dir, 1)
    (config,) = started
    assert set(config.placement.pools) == {"train"}
    assert config.placement.pool_of("actor") == "train"
    assert config.trainer.partial_rollout_tokens == 0


def test_replay_of_a_policy_with_dropout_says_it_cannot_reproduce_bit_for_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: no word of it; replay re-seeded the RNGs from trainer.seed (not the state the
    # run's workers had at the update), so a deterministic run with dropout read "DIFFERS".
    import hfsdk
    from hfsdk_run_records import replay

    lora = ["actor.lora.rank=4", "actor.lora.dropout=0.1"]
    run_config = load_run_config("grpo", None, [*SMALL, *lora])
    run_dir = _fake_dumps(tmp_path / "run", 1)
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "actor/pg_loss": 0.5}\n')

    def session(config: object, spec: object, prepared: object) -> None:
        raise _Started

    monkeypatch.setattr(replay, "_run_config", lambda run_dir: run_config)
    monkeypatch.setattr(hfsdk, "prepare_run", lambda config, spec: None)  # data: not needed
    monkeypatch.setattr(hfsdk, "TrainingSession", session)
    with caplog.at_level("WARNING"), pytest.raises(_Started):
        replay_steps(run_dir, 1)
    (line,) = [r.getMessage() for r in caplog.records if "dropout" in r.getMessage()]
    assert "actor.lora.dropout=0.1" in line and "cannot be reproduced bit for bit" in line
    assert "\n" not in line


def test_what_makes_an_update_draw_random_numbers_is_named(tmp_path: Path) -> None:
    from hfsdk_run_records.replay import dropout_settings

    plain = load_run_config("grpo", None, SMALL)
    assert dropout_settings(plain, None) == []
    off = load_run_config("grpo", None, [*SMALL, "actor.lora.dropout=0.1"])  # adapters off
    assert dropout_settings(off, None) == []
    lora = load_run_config("grpo", None, [*SMALL, "actor.lora.rank=4", "actor.lora.dropout=0.1"])
    assert dropout_settings(lora, None) == ["actor.lora.dropout=0.1"]
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"attention_dropout": 0.1, "hidden_dropout": 0.0}')
    assert dropout_settings(plain, str(model)) == [f"attention_dropout=0.1 in {model}/config.json"]
    (model / "config.json").write_text('{"attention_dropout": 0.0, "resid_pdrop": 0}')
    assert dropout_settings(plain, str(model)) == []


# Heavy: the one Ray run with a rollout pool here; the quick tests above check the config
# replay and export hand their sessions.
@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.distributed
def test_a_rollout_pool_run_replays_exactly_without_its_replicas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hfsdk

    pool = [
        "trainer.total_steps=2",
        "trainer.pipeline=one_step_off",
        "trainer.rollout_dump=true",
        "trainer.executor=ray",
        "placement.pools.global.devices=1",
        "placement.pools.rollout.devices=1",
    ]
    rows = _fit(tmp_path / "run", *pool)
    replicas = []

    class Session(hfsdk.TrainingSession):  # type: ignore[misc, valid-type]
        def __exit__(self, *exc: object) -> None:
            replicas.append(self.rollout)
            super().__exit__(*exc)

    monkeypatch.setattr(hfsdk, "TrainingSession", Session)
    results = replay_steps(tmp_path / "run", 2)
    assert replicas == [None]
    assert [r.step for r in results] == [1, 2]
    for result in results:
        assert result.differing == [], (result.step, result.differing)
        assert result.replayed["actor/grad_norm"] == rows[result.step - 1]["actor/grad_norm"]


@functools.cache
def _small_config_yaml() -> str:
    return load_run_config("grpo", None, list(SMALL)).to_yaml()


def _fake_run(run_dir: Path, metrics: str, steps: int = 3) -> Path:
    """A run directory with ``config.yaml``, ``steps`` placeholder dumps and ``metrics``."""
    _fake_dumps(run_dir, steps)
    (run_dir / "config.yaml").write_text(_small_config_yaml())
    (run_dir / "metrics.jsonl").write_text(metrics)
    return run_dir


def _no_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand in for the session's preparation (model, tokenizer): reaching it raises
    :class:`_Started`."""
    import types

    import hfsdk
    from hfsdk_run_records import replay

    def prepare(config: object, spec: object) -> None:
        raise _Started

    monkeypatch.setattr(replay, "_update_only", prepare)
    # The model's files are only read for its dropout rates: none here.
    monkeypatch.setattr(hfsdk, "run_assets", lambda c, s: types.SimpleNamespace(model_path=None))


def test_a_checkpoint_whose_trainer_state_is_unusable_is_refused_before_any_worker_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: an older COMPLETE marker (the step number alone) lists no files to verify, so
    # a missing, cut or foreign trainer_state.pt crashed after the workers had started
    # (FileNotFoundError, PytorchStreamReader's RuntimeError, KeyError 'algorithm').
    _no_workers(monkeypatch)
    metrics = "".join(f'{{"step": {s}, "actor/pg_loss": 0.5}}\n' for s in range(4))
    whole = tmp_path / "state.pt"
    torch.save({"step": 2, "algorithm": {}}, whole)
    spoils = {
        "missing": (None, "is missing"),
        "truncated": (whole.read_bytes()[:100], "cannot be read"),
        "no algorithm": ({"step": 2}, "'algorithm'"),
        "not a dict": ([2], "'algorithm'"),
    }
    for number, (state, says) in enumerate(spoils.values()):
        run_dir = _fake_run(tmp_path / f"run{number}", metrics)
        checkpoint = run_dir / "checkpoints" / "step_2"
        checkpoint.mkdir(parents=True)
        (checkpoint / "COMPLETE").write_text("2")  # an older marker: the step alone
        path = checkpoint / "trainer_state.pt"
        if isinstance(state, bytes):
            path.write_bytes(state)
        elif state is not None:
            torch.save(state, path)
        with pytest.raises(HfsdkError) as info:
            replay_steps(run_dir, 3)
        line = str(info.value)
        assert "checkpoint step_2" in line and str(path) in line and says in line, line
        assert "restore" in line and "\n" not in line, line
    # An intact one passes the check and reaches the workers.
    run_dir = _fake_run(tmp_path / "intact", metrics)
    checkpoint = run_dir / "checkpoints" / "step_2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "COMPLETE").write_text("2")
    shutil.copy(whole, checkpoint / "trainer_state.pt")
    with pytest.raises(_Started):
        replay_steps(run_dir, 3)


def test_replay_exits_1_when_an_earlier_replayed_step_differs_and_shows_that_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: only the last replayed step decided the exit status, so a replay that diverged
    # at step 2 and happened to match at step 3 exited 0, its step-2 table never shown.
    from hfsdk_run_records import replay
    from hfsdk_run_records.replay import ReplayedStep

    results = [
        ReplayedStep(step=2, logged={"actor/loss": 1.0}, replayed={"actor/loss": 1.5}),
        ReplayedStep(step=3, logged={"actor/loss": 2.0}, replayed={"actor/loss": 2.0}),
    ]
    monkeypatch.setattr(replay, "replay_steps", lambda run_dir, step: results)
    with pytest.raises(SystemExit) as info:
        main(["replay", "run", "--step", "3"])
    out = capsys.readouterr().out
    assert info.value.code == 1, out
    lines = out.splitlines()
    differs = [line for line in lines if "DIFFERS" in line]
    assert differs and "logged 1.0" in differs[0] and "replayed 1.5" in differs[0], out
    assert lines.index(differs[0]) < lines.index("step 2: 1 metrics compared, 1 metric(s) differ")
    assert "first differs at step 2" in lines[-1], out


def test_an_unlogged_step_is_answered_with_the_steps_the_run_logged(tmp_path: Path) -> None:
    # Before: "logged steps 1..3" counted step 0 (validation before training) and covered
    # gaps: a log of steps 0, 1, 3 said 1..3 (2 missing), one of step 0 alone said 1..0.
    for metrics, step, says in (
        ('{"step": 0}\n{"step": 1}\n{"step": 3}\n', 2, "logged steps 1, 3; pass one of them"),
        ('{"step": 0}\n{"step": 1}\n{"step": 2}\n{"step": 3}\n', 0, "logged steps 1..3;"),
        ("".join(f'{{"step": {s}}}\n' for s in (0, 1, 2, 3, 5, 7, 8)), 4, "steps 1..3, 5, 7, 8;"),
        ('{"step": 0}\n', 1, "logged no steps"),
    ):
        run_dir = _fake_run(tmp_path / f"run{step}", metrics)
        with pytest.raises(HfsdkError) as info:
            replay_steps(run_dir, step)
        line = str(info.value)
        assert says in line and "1..0" not in line and "\n" not in line, line


def test_a_non_numeric_logged_metric_is_skipped_with_a_warning_naming_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: replay's float() of the logged value raised a bare ValueError (after the whole
    # update ran). Like a damaged line, the damaged value is skipped with a warning instead.
    from hfsdk_run_records.replay import logged_metrics

    metrics = '{"step": 0}\n{"step": 1, "actor/pg_loss": "abc", "actor/kl": 0.25}\nnot json\n'
    run_dir = _fake_run(tmp_path / "run", metrics)
    with caplog.at_level("WARNING"):
        logged = logged_metrics(run_dir)
    assert logged == {0: {"step": 0}, 1: {"step": 1, "actor/kl": 0.25}}
    (line,) = [r.getMessage() for r in caplog.records if "actor/pg_loss" in r.getMessage()]
    assert f"{run_dir / 'metrics.jsonl'} line 2" in line and "'abc'" in line, line
    assert "skipped" in line and "\n" not in line, line


@pytest.mark.slow
def test_replay_of_a_log_with_a_non_numeric_value_compares_the_rest(
    dumped: tuple[Path, list[dict]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "Error: ValueError: could not convert string to float: 'abc' (internal error)".
    import json

    run_dir, _ = dumped
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    path = copy / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if row["step"] == 3:
            row["actor/pg_loss"] = "abc"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(SystemExit) as info:
        main(["replay", str(copy), "--step", "3"])
    captured = capsys.readouterr()
    assert info.value.code == 0, captured
    assert "actor/grad_norm" in captured.out and "actor/pg_loss" not in captured.out
    assert captured.out.splitlines()[-1].endswith("reproduced exactly"), captured.out
    warned = [line for line in captured.err.splitlines() if "actor/pg_loss" in line]
    assert len(warned) == 1 and "'abc', not a number; skipped" in warned[0], captured.err
