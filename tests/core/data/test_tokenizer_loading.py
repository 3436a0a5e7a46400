"""One tokenizer loader, one pad rule: a tokenizer without a pad token pads with EOS on the
controller and in every backend's workers alike (issue 42 #5)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hfsdk
from hfsdk import default_task_assets
from hfsdk.core.errors import HfsdkError


@pytest.fixture(scope="module")
def no_pad_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default task's tokenizer saved without its pad token."""
    target = tmp_path_factory.mktemp("tok") / "no_pad"
    shutil.copytree(default_task_assets().tokenizer_dir, target)
    config = json.loads((target / "tokenizer_config.json").read_text())
    config.pop("pad_token")
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    return target


def test_every_loader_gives_the_same_pad_token(no_pad_tokenizer: Path) -> None:
    from hfsdk import load_tokenizer as default_task_loader

    tokenizer = hfsdk.load_tokenizer(no_pad_tokenizer)
    assert tokenizer.pad_token == tokenizer.eos_token == "</s>"
    assert default_task_loader(no_pad_tokenizer).pad_token_id == tokenizer.pad_token_id
    import importlib.util

    assert importlib.util.find_spec("hfsdk_backend_common.tokenizers") is None  # no second one


def test_a_tokenizer_with_neither_pad_nor_eos_is_refused(
    no_pad_tokenizer: Path, tmp_path: Path
) -> None:
    target = tmp_path / "bare"
    shutil.copytree(no_pad_tokenizer, target)
    config = json.loads((target / "tokenizer_config.json").read_text())
    config.pop("eos_token")
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(HfsdkError, match="has neither a pad nor an EOS token"):
        hfsdk.load_tokenizer(target)
    with pytest.raises(HfsdkError, match=r"^tokenizer path='.*missing' does not exist"):
        hfsdk.load_tokenizer(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(HfsdkError, match=r"'.*file' is not a directory"):
        hfsdk.load_tokenizer(tmp_path / "file")


def test_a_tokenizer_that_does_not_load_says_why(no_pad_tokenizer: Path, tmp_path: Path) -> None:
    """Before: every failure was the same line, advising a tokenizer.json the directory held."""
    broken = tmp_path / "broken"
    shutil.copytree(no_pad_tokenizer, broken)
    saved = json.loads((broken / "tokenizer.json").read_text())
    saved["model"] = {"type": "NoSuchModel"}
    (broken / "tokenizer.json").write_text(json.dumps(saved))
    with pytest.raises(HfsdkError) as info:
        hfsdk.load_tokenizer(broken, key="actor.model_path")
    said = str(info.value)
    assert said.startswith(f"actor.model_path={str(broken)!r} holds no tokenizer that loads; ")
    # the first line of tokenizers' own error: what in the file it could not read
    assert "; hfsdk never downloads from the hub (the loader said: data did not match " in said
    assert "holding tokenizer.json" not in said and "\n" not in said
    # Files there that do not load: the loader's whole text, not its first line's half.
    (odd := tmp_path / "odd").mkdir()
    (odd / "tokenizer_config.json").write_text('{"tokenizer_class": "NoSuchTokenizer"}')
    with pytest.raises(HfsdkError, match=r"\) holding tokenizer\.json; .* \(the loader said: "
                       r"Couldn't .* from one of: \(1\) .* \(3\) .*fast one\.\)$"):  # fmt: skip
        hfsdk.load_tokenizer(odd)


def test_a_model_directory_without_tokenizer_files_says_to_save_one_or_set_tokenizer_path(
    tmp_path: Path,
) -> None:
    """Before: "... (the loader said: Couldn't instantiate the backend tokenizer from one of: )"
    and no word of reference.tokenizer_path, the key that fixes it."""
    (model := tmp_path / "model").mkdir()
    (model / "config.json").write_text("{}")
    with pytest.raises(HfsdkError) as info:
        hfsdk.load_tokenizer(model, key="reference.model_path")
    assert str(info.value) == (
        f"reference.model_path={str(model)!r} has no tokenizer files (tokenizer*, vocab.*, "
        f"*.model); save one there (tokenizer.save_pretrained({str(model)!r})) or set "
        "reference.tokenizer_path=DIR to a directory holding one; hfsdk never downloads from "
        "the hub"
    )
    with pytest.raises(HfsdkError, match=r"'\)\) or point it at a directory holding one; hfsdk"):
        hfsdk.load_tokenizer(tmp_path)  # no role to name


@pytest.mark.slow
@pytest.mark.heavy
def test_a_run_on_a_tokenizer_without_pad_token_trains(
    no_pad_tokenizer: Path, tmp_path: Path
) -> None:
    """Preflight and the rollout agree: the run trains (on main the actor refused to start)."""
    tok = str(no_pad_tokenizer)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "hfsdk"), "run", "--algo", "grpo", "--quiet",
            "--run-dir", str(tmp_path / "run"), "trainer.total_steps=1", "data.batch_size=4",
            "algorithm.n_samples_per_prompt=2", "actor.mini_batch_size=4",
            f"actor.tokenizer_path={tok}", f"reference.tokenizer_path={tok}",
        ],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("\n") == 1
