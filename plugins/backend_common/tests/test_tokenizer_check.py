"""The ``shared_tokenizer`` preflight check: a role that reads the policy's ids shares its vocab."""

from __future__ import annotations

import json
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
        with pytest.raises(
            ConfigError, match=rf"{role}\.model_path \(.*other\) has another tokenizer"
        ):
            check_shared_tokenizer(config, run_spec(config), _prepared(policy))


def test_a_teacher_without_tokenizer_files_needs_a_row_for_every_id(tmp_path: Path) -> None:
    """No tokenizer to compare: a model with fewer vocabulary rows than the policy's tokenizer
    is refused (it failed mid-step with an IndexError); as many rows pass (nothing to tell)."""
    policy = Path(hfsdk.default_task_assets().model_dir)
    size = len(load_tokenizer(str(policy)).get_vocab())
    for name, rows in (("small", size - 1), ("wide", size)):
        folder = tmp_path / name
        folder.mkdir()
        config = json.loads((policy / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "vocab_size": rows}))
    base = [f"actor.model_path={policy}"]
    config = load_run_config("distill", None, [*base, f"teacher.model_path={tmp_path / 'wide'}"])
    check_shared_tokenizer(config, run_spec(config), _prepared(policy))
    config = load_run_config("distill", None, [*base, f"teacher.model_path={tmp_path / 'small'}"])
    message = rf"teacher\.model_path \(.*small\) has no tokenizer that loads and {size - 1} vocabulary rows"
    with pytest.raises(ConfigError, match=message):
        check_shared_tokenizer(config, run_spec(config), _prepared(policy))


def _with_rows(source: Path, folder: Path, rows: int) -> Path:
    """A copy of ``source``'s tokenizer with a ``config.json`` of ``rows`` vocabulary rows
    (the check reads only these)."""
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, folder / name)
    config = json.loads((source / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "vocab_size": rows}))
    return folder


def test_a_role_with_fewer_embedding_rows_than_the_tokenizer_is_refused(tmp_path: Path) -> None:
    """Same tokenizer: a reference, teacher or critic with fewer rows than its tokens failed
    mid-step with an IndexError (refused); with fewer rows than a policy that pads its
    embeddings further (a family's larger model) the run goes on with a warning."""
    source = Path(hfsdk.default_task_assets().model_dir)
    size = len(load_tokenizer(str(source)).get_vocab())
    policy = _with_rows(source, tmp_path / "policy", size + 6)
    short = _with_rows(source, tmp_path / "short", size - 1)
    narrow = _with_rows(source, tmp_path / "narrow", size)
    wider = _with_rows(source, tmp_path / "wider", size + 8)
    prepared = _prepared(policy)
    prepared.assets.model_path = str(policy)
    base = [f"actor.model_path={policy}"]
    for algo, role in (("grpo", "reference"), ("distill", "teacher"), ("ppo", "critic")):
        config = load_run_config(algo, None, [*base, f"{role}.model_path={wider}"])
        assert check_shared_tokenizer(config, run_spec(config), prepared) is None
        for extra in ([], [f"{role}.tokenizer_path={policy}"]):  # its own or the policy's
            config = load_run_config(algo, None, [*base, f"{role}.model_path={short}", *extra])
            message = (
                rf"^{role}\.model_path \(.*short\) has {size - 1} embedding rows, fewer than "
                rf"the tokenizer's {size} tokens: the policy can sample ids {role} has no "
                rf"embedding for; give {role} a model with at least {size} rows$"
            )
            with pytest.raises(ConfigError, match=message):
                check_shared_tokenizer(config, run_spec(config), prepared)
            config = load_run_config(algo, None, [*base, f"{role}.model_path={narrow}", *extra])
            warning = check_shared_tokenizer(config, run_spec(config), prepared)
            assert warning is not None and warning.startswith(
                f"{role}.model_path ({narrow}) has {size} embedding rows, the policy {size + 6}"
            )


def test_a_reward_or_cost_model_with_another_tokenizer_or_fewer_rows_is_refused(
    tmp_path: Path,
) -> None:
    """A signal's scoring model reads the policy's ids as they are: it was skipped (a scorer
    role, its path under ``reward.model``) and scored every id as another token, silently."""
    source = Path(hfsdk.default_task_assets().model_dir)
    size = len(load_tokenizer(str(source)).get_vocab())
    policy = _with_rows(source, tmp_path / "policy", size + 6)
    same = _with_rows(source, tmp_path / "same", size + 6)
    short = _with_rows(source, tmp_path / "short", size - 1)
    other = _with_rows(source, tmp_path / "other", size + 6)
    tokenizer = load_tokenizer(str(other))
    tokenizer.add_tokens(["zebra"])
    tokenizer.save_pretrained(str(other))
    prepared = _prepared(policy)
    prepared.assets.model_path = str(policy)
    base = [f"actor.model_path={policy}"]
    for algo, signal in (("grpo", "reward"), ("safe_rlhf", "cost")):
        config = load_run_config(algo, None, [*base, f"{signal}.model.model_path={same}"])
        check_shared_tokenizer(config, run_spec(config), prepared)  # same tokenizer and rows
        config = load_run_config(algo, None, [*base, f"{signal}.model.model_path={other}"])
        message = rf"^{signal}\.model\.model_path \(.*other\) has another tokenizer than the policy"
        with pytest.raises(ConfigError, match=message):
            check_shared_tokenizer(config, run_spec(config), prepared)
        config = load_run_config(algo, None, [*base, f"{signal}.model.model_path={short}"])
        message = rf"^{signal}\.model\.model_path \(.*short\) has {size - 1} embedding rows"
        with pytest.raises(ConfigError, match=message):
            check_shared_tokenizer(config, run_spec(config), prepared)
