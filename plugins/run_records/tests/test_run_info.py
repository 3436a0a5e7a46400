"""``run_info.jsonl``: one line per start of a run (versions, plugins, git, checksums), a
resume's warning of a changed data file, and replay's warning of what changed since the run."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hfsdk import get_plugin_manager, get_registry, run_assets, run_spec
from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_run_records import run_info
from hfsdk_run_records.run_info import (
    RUN_INFO_FILE,
    RunInfoObserver,
    git_state,
    read_last,
    warn_of_changes,
)
from hfsdk_testing import SMALL_GRPO


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / RUN_INFO_FILE).read_text().splitlines()]


def _config(data: Path, total_steps: int):  # type: ignore[no-untyped-def]
    return load_run_config(
        "grpo",
        None,
        [
            *SMALL_GRPO,
            f"data.train_files=[{data / 'train.jsonl'}]",
            f"data.val_files=[{data / 'val.jsonl'}]",
            "reward.functions=[{name: default_task}]",  # the default task's, on its data
            f"trainer.total_steps={total_steps}",
            "trainer.save_every=1",
            "trainer.rollout_dump=true",
        ],
    )


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A run of 1 step on copies of the default task's data, its train file then changed
    (one line added), and the run resumed to 2 steps."""
    root = tmp_path_factory.mktemp("run_info")
    data = root / "data"
    data.mkdir()
    default = run_assets(load_run_config("grpo"), run_spec(load_run_config("grpo")))
    shutil.copy(default.train_files[0], data / "train.jsonl")
    shutil.copy(default.val_files[0], data / "val.jsonl")
    run_dir = root / "run"
    Trainer(_config(data, 1), run_dir, quiet=True).fit()
    first = (data / "train.jsonl").read_bytes()
    lines = first.splitlines(keepends=True)
    (data / "train.jsonl").write_bytes(first + lines[0])  # still valid: one prompt twice
    Trainer(_config(data, 2), run_dir, quiet=True).fit()
    return {
        "run_dir": run_dir,
        "data": data,
        "first_train_sha": hashlib.sha256(first).hexdigest(),
        "model": default.model_path,
    }


def test_the_run_info_observer_is_registered_for_every_run() -> None:
    entry = get_registry("step_observers")["run_info"]
    assert entry.plugin == "run_records"


@pytest.mark.slow
def test_a_run_and_its_resume_append_one_line_each_with_versions_and_checksums(
    resumed: dict,
) -> None:
    run_dir, data = resumed["run_dir"], resumed["data"]
    lines = _lines(run_dir)
    assert [line["start_step"] for line in lines] == [0, 1]
    for line in lines:
        assert line["time"].endswith("+00:00")
        assert line["packages"]["torch"] == importlib.metadata.version("torch")
        assert line["packages"]["hfsdk"] == importlib.metadata.version("hfsdk")
        assert line["plugins"]["run_records"] == {
            "distribution": "hfsdk-plugin-run-records",
            "version": importlib.metadata.version("hfsdk-plugin-run-records"),
        }
        assert {p.name for p in get_plugin_manager().plugins if p.status == "loaded"} == set(
            line["plugins"]
        )
        assert {"python", "platform", "machine", "torch_cpu_capability", "git"} <= set(line)
        val = str(data / "val.jsonl")
        assert line["data"][val]["sha256"] == _sha(data / "val.jsonl")
        actor = line["models"]["actor"]  # no model_path: the default task's model it ran
        assert actor["path"] == resumed["model"]
        weights = Path(resumed["model"]) / "model.safetensors"
        assert actor["files"]["model.safetensors"]["sha256"] == _sha(weights)
        assert {"config.json", "tokenizer.json"} <= set(actor["files"])
        assert line["models"]["reference"] == {"path": None, "files": None}
    train = str(data / "train.jsonl")
    assert lines[0]["data"][train]["sha256"] == resumed["first_train_sha"]
    assert lines[1]["data"][train]["sha256"] == _sha(data / "train.jsonl")
    assert lines[0]["data"][train]["sha256"] != lines[1]["data"][train]["sha256"]


@pytest.mark.slow
def test_a_resume_on_a_changed_data_file_logs_one_warning_naming_it(resumed: dict) -> None:
    log = (resumed["run_dir"] / "hfsdk.log").read_text()
    warned = [line for line in log.splitlines() if "changed since the run's last start" in line]
    assert len(warned) == 1, warned
    assert "WARNING" in warned[0] and str(resumed["data"] / "train.jsonl") in warned[0]
    assert str(resumed["data"] / "val.jsonl") not in log  # unchanged: not named


@pytest.mark.slow
def test_replay_warns_of_a_changed_data_file_and_of_other_versions(
    resumed: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "run"
    shutil.copytree(resumed["run_dir"], run_dir)
    config = load_run_config(None, str(run_dir / "config.yaml"))
    assert warn_of_changes(run_dir, config) == []  # nothing changed since the resume
    assert capsys.readouterr().err == ""
    train = resumed["data"] / "train.jsonl"
    original = train.read_bytes()
    try:
        train.write_bytes(original + original.splitlines(keepends=True)[0])
        lines = warn_of_changes(run_dir, config)
        err = capsys.readouterr().err
        assert len(lines) == 1 and f"data file {train}" in lines[0], lines
        assert err.splitlines() == lines and lines[0].startswith("replay: ")
        assert lines[0].endswith("; numbers may differ")

        versions = {**run_info.package_versions(), "torch": "9.9.9"}
        monkeypatch.setattr(run_info, "package_versions", lambda: versions)
        torch_version = importlib.metadata.version("torch")
        lines = warn_of_changes(run_dir, config)
        assert f"replay: torch 9.9.9 here, {torch_version} in the run; numbers may differ" in lines
    finally:
        train.write_bytes(original)


@pytest.mark.slow
def test_hfsdk_replay_prints_the_warning_before_its_verdict(
    resumed: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(resumed["run_dir"], run_dir)
    last = read_last(run_dir)
    assert last is not None
    last["packages"]["transformers"] = "0.0.1"  # as if the run had used another version
    with (run_dir / RUN_INFO_FILE).open("a") as f:
        f.write(json.dumps(last) + "\n")
    with pytest.raises(SystemExit) as info:
        main(["replay", str(run_dir), "--step", "2"])
    out, err = capsys.readouterr()
    assert info.value.code == 0, out + err
    assert "replay: transformers " in err and ", 0.0.1 in the run; numbers may differ" in err
    assert out.splitlines()[-1].endswith("reproduced exactly")


def test_a_run_without_run_info_replays_without_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert read_last(tmp_path) is None
    assert warn_of_changes(tmp_path, load_run_config("grpo")) == []
    assert capsys.readouterr().err == ""


def test_a_cut_last_line_is_skipped_and_a_line_is_appended_whole(tmp_path: Path) -> None:
    run_info.append(tmp_path, {"start_step": 0})
    with (tmp_path / RUN_INFO_FILE).open("a") as f:
        f.write('{"start_step": 3, "pack')  # a crash of an older writer mid-line
    assert read_last(tmp_path) == {"start_step": 0}


def test_git_state_is_null_without_git_or_outside_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_git(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError("git")

    monkeypatch.setattr(subprocess, "run", no_git)
    assert git_state(tmp_path) == {"commit": None, "dirty": None}
    answers = {"rev-parse": "abc123\n", "status": " M hfsdk/x.py\n"}
    monkeypatch.setattr(
        run_info, "_git", lambda cwd, *args: answers["status" if "status" in args else "rev-parse"]
    )
    assert git_state(tmp_path) == {"commit": "abc123", "dirty": True}
    answers["status"] = ""
    assert git_state(tmp_path) == {"commit": "abc123", "dirty": False}
    monkeypatch.setattr(run_info, "_git", lambda cwd, *args: None)
    assert git_state(tmp_path) == {"commit": None, "dirty": None}


def test_files_above_the_hash_limit_record_size_and_mtime_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"x" * 100)
    (model / "notes.txt").write_text("not a model file")
    full = run_info.model_checksums(str(model))
    assert set(full["files"]) == {"config.json", "model.safetensors"}
    assert full["files"]["config.json"]["sha256"] == _sha(model / "config.json")
    monkeypatch.setattr(run_info, "HASH_LIMIT_BYTES", 50)  # the directory's 102 bytes: above
    limited = run_info.model_checksums(str(model))
    for name, record in limited["files"].items():
        assert record["sha256"] is None and record["size"] == (model / name).stat().st_size
    data = run_info.data_checksums([str(model / "model.safetensors"), str(tmp_path / "gone")])
    assert data[str(model / "model.safetensors")]["sha256"] is None
    assert data[str(tmp_path / "gone")] is None


def test_the_observer_writes_once_per_start_with_the_step_it_starts_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    monkeypatch.setattr(run_info, "collect", lambda config: {"data": {}})
    observer = RunInfoObserver(None, tmp_path)
    observer.on_step_start(SimpleNamespace(step=5))
    observer.on_step_start(SimpleNamespace(step=6))
    assert [line["start_step"] for line in _lines(tmp_path)] == [4]
