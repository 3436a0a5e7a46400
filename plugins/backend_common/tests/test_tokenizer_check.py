"""The ``shared_tokenizer`` preflight check: a role that reads the policy's ids shares its vocab."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import hfsdk
from hfsdk import ConfigError, load_tokenizer, run_spec
from hfsdk.core.config import load_run_config
from hfsdk_backend_common.tokenizer_check import check_shared_tokenizer


def _prepared(model: Path) -> SimpleNamespace:
    return SimpleNamespace(
        assets=SimpleNamespace(tokenizer_path=str(model)), tokenizer=load_tokenizer(str(model))
    )


def test_a_reference_or_teacher_with_another_vocabulary_is_refused(tmp_path: Path) -> None:
    policy = Path(hfsdk.default_task_assets().model_dir)
    same, other = tmp_path / "same", tmp_path / "other"
    shutil.copytree(policy, same)
    shutil.copytree(policy, other)
    tokenizer = load_tokenizer(str(other))
    tokenizer.add_tokens(["zebra"])
    tokenizer.save_pretrained(str(other))
    base = [f"actor.model_path={policy}"]
    config = load_run_config("grpo", None, [*base, f"reference.model_path={same}"])
    check_shared_tokenizer(config, run_spec(config), _prepared(policy))  # a copy: the same
    for algo, role in (("grpo", "reference"), ("distill", "teacher")):
        config = load_run_config(algo, None, [*base, f"{role}.model_path={other}"])
        # Before: trained on, each id read as another token (or past the embeddings).
        with pytest.raises(ConfigError, match=rf"{role} \(.*other\) has another tokenizer"):
            check_shared_tokenizer(config, run_spec(config), _prepared(policy))
