"""The validation plugin's checks before a run: a bad answer pattern is refused with the
config; validation asked for without validation data is warned about; validation rows the
reward functions cannot score are refused, naming data.val_files."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import hfsdk
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import ConfigError
from hfsdk.core.trainer.preflight import prepare_run
from hfsdk_testing.cli import assert_refused_in_one_line
from hfsdk_validation.checks import missing_validation_data

SMALL = ["data.batch_size=2", "trainer.executor=local", "reward.functions=[{name: exact_match}]"]


def test_an_invalid_answer_pattern_is_refused_with_the_config() -> None:
    with pytest.raises(ConfigError, match=r"^trainer\.val_answer_pattern='\(\\\\d\+' is not a val"):
        load_run_config("grpo", None, [r"trainer.val_answer_pattern=(\d+"])
    load_run_config("grpo", None, [r"trainer.val_answer_pattern=<answer>(\d+)</answer>"])


def test_the_cli_refuses_an_invalid_answer_pattern_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--algo", "grpo", "--run-dir", str(tmp_path / "run")]
    assert_refused_in_one_line(
        [*args, r"trainer.val_answer_pattern=(\d+"],
        r"trainer\.val_answer_pattern=.*not a valid regular expression",
        capsys,
        root=tmp_path,
    )


def _grpo() -> hfsdk.AlgorithmSpec:
    return hfsdk.get_registry("algorithms")["grpo"].impl


def _jsonl(path: Path, answer_key: str) -> str:
    rows = [{"prompt": "2 + 3 =", answer_key: "5"}, {"prompt": "1 + 1 =", answer_key: "2"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.mark.parametrize(
    ("overrides", "keys"),
    [
        (["trainer.val_every=2"], "trainer.val_every=2"),
        (["trainer.val_before_train=true"], "trainer.val_before_train=true"),
    ],
)
def test_validation_without_validation_data_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, overrides: list[str], keys: str
) -> None:
    train = _jsonl(tmp_path / "train.jsonl", "answer")
    config = load_run_config("grpo", None, [*SMALL, f"data.train_files=[{train}]", *overrides])
    with caplog.at_level(logging.WARNING):
        prepare_run(config, _grpo())
    lines = [r.getMessage() for r in caplog.records if "no validation data" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], caplog.text
    assert lines[0].startswith(f"validation is asked for ({keys})") and "data.val_files" in lines[0]


def test_no_warning_when_there_is_validation_data_or_no_validation(tmp_path: Path) -> None:
    train = _jsonl(tmp_path / "train.jsonl", "answer")
    config = load_run_config("grpo", None, [*SMALL, f"data.train_files=[{train}]"])
    assert missing_validation_data(config, None, prepare_run(config, _grpo())) is None
    config = load_run_config("grpo", None, [*SMALL, "trainer.val_every=2"])  # the default task's
    assert missing_validation_data(config, None, prepare_run(config, _grpo())) is None
