"""The task registry: ``--task`` names what plugins register; the docs' example runs as written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import hfsdk
from hfsdk.core.cli.main import main
from hfsdk.core.plugin_manager import reset_plugin_manager

from ..conftest import make_distribution

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugin_hooks.md"


def _doc_example() -> str:
    section = DOC.read_text().split("## hfsdk_register_tasks\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return blocks[-1]  # the first block is the signature


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_the_documented_task_plugin_is_offered_by_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    default = hfsdk.default_task_assets()  # files for the example task to point at
    cache = tmp_path / "cache"
    root = cache / "my_task"
    shutil.copytree(default.model_dir, root / "model")
    shutil.copy(default.train_files[0], root / "train.jsonl")
    shutil.copy(default.val_files[0], root / "val.jsonl")
    monkeypatch.setenv("HFSDK_CACHE_DIR", str(cache))
    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "hfsdk-my-task", "my_task_plugin", "my_task_plugin", _doc_example())
    monkeypatch.syspath_prepend(str(site))
    reset_plugin_manager()

    assert hfsdk.get_registry("tasks")["my_task"].plugin == "my_task_plugin"
    assert hfsdk.get_task("my_task").build().model_dir == root / "model"
    code, out, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", "--task", "my_task")
    assert code == 0, err
    assert f"model_path: {root / 'model'}" in out
    assert str(root / "train.jsonl") in out and "name: exact_match" in out
    # An unregistered name is one line listing what is registered.
    code, _out, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", "--task", "nope")
    assert code == 2 and "unknown task 'nope'; available: " in err
    assert "my_task" in err and "Traceback" not in err
    code, _out, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", "--task", "my_tsak")
    assert (
        code == 2 and "did you mean 'my_task'?" in err and "install hfsdk-plugin-tasks" not in err
    )


def test_the_default_task_comes_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    task = hfsdk.get_task()
    assert hfsdk.get_registry("tasks")["default"].plugin == "tasks"
    assert hfsdk.default_model_dir() == task.build().model_dir
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "tasks")
    reset_plugin_manager()
    with pytest.raises(hfsdk.HfsdkError, match="install hfsdk-plugin-tasks"):
        hfsdk.default_model_dir()
