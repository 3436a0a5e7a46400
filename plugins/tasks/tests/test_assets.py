"""Building, caching and loading the default task's assets."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import attrs
import datasets
import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from hfsdk.core.errors import HfsdkError
from hfsdk_tasks import (
    DefaultAssets,
    DefaultTaskSpec,
    build_prompt_dataset,
    cache_root,
    ensure_default_assets,
    load_prompt_dataset,
)
from hfsdk_tasks import assets as assets_module


def test_every_asset_exists_and_the_cache_is_reused(default_assets: DefaultAssets) -> None:
    assert all(path.exists() for path in default_assets.required_paths())
    weights = default_assets.model_dir / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    again = ensure_default_assets(cache_dir=default_assets.root.parent.parent)
    assert again.root == default_assets.root
    assert weights.stat().st_mtime_ns == stamp  # not rebuilt
    assert again.build_info["cache_key"] == default_assets.root.name


def test_model_dir_loads_for_every_role(default_assets: DefaultAssets) -> None:
    path = str(default_assets.model_dir)
    ids = torch.tensor([[1, 5, 6, 7, 8]])
    actor = AutoModelForCausalLM.from_pretrained(path)
    assert actor.config.model_type == "llama"
    assert actor(input_ids=ids).logits.shape == (1, 5, actor.config.vocab_size)
    critic = AutoModelForTokenClassification.from_pretrained(path, num_labels=1)
    assert critic(input_ids=ids).logits.shape == (1, 5, 1)
    scorer = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    assert scorer(input_ids=ids).logits.shape == (1, 1)
    # The critic's backbone is the actor's.
    torch.testing.assert_close(critic.model.embed_tokens.weight, actor.model.embed_tokens.weight)


def test_dataset_files_hold_the_same_rows(default_assets: DefaultAssets) -> None:
    expected = build_prompt_dataset("train", default_assets.spec).to_list()
    assert len(expected) == 100
    from_jsonl = datasets.Dataset.from_json(str(default_assets.train_jsonl))
    from_parquet = datasets.Dataset.from_parquet(str(default_assets.train_parquet))
    from_dir = datasets.load_from_disk(str(default_assets.train_dataset_dir))
    for loaded in (from_jsonl, from_parquet, from_dir):
        assert loaded.column_names == ["prompt", "answer"]
        assert loaded.to_list() == expected
    val = load_prompt_dataset("val", default_assets)
    assert len(val) == default_assets.spec.val_size
    assert val.to_list() == build_prompt_dataset("val", default_assets.spec).to_list()
    with pytest.raises(HfsdkError, match="splits 'train' and 'val'"):
        build_prompt_dataset("test")  # type: ignore[arg-type]


def test_cache_root_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, quick_spec: DefaultTaskSpec
) -> None:
    monkeypatch.setenv("HFSDK_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    built = ensure_default_assets(quick_spec)
    assert built.root.parent == tmp_path / "c" / "default_task"
    monkeypatch.delenv("HFSDK_CACHE_DIR")
    assert cache_root() == Path.home() / ".cache" / "hfsdk"


def test_build_leaves_no_staging_directory_and_keys_by_spec(
    quick_cache: Path, quick_spec: DefaultTaskSpec
) -> None:
    first = ensure_default_assets(quick_spec, cache_dir=quick_cache)
    other = ensure_default_assets(attrs.evolve(quick_spec, seed=3), cache_dir=quick_cache)
    names = sorted(p.name for p in (quick_cache / "default_task").iterdir())
    assert names == sorted([first.root.name, other.root.name])
    assert first.root != other.root


def test_a_damaged_cache_is_rebuilt(quick_cache: Path, quick_spec: DefaultTaskSpec) -> None:
    first = ensure_default_assets(quick_spec, cache_dir=quick_cache)
    (first.model_dir / "model.safetensors").unlink()
    again = ensure_default_assets(quick_spec, cache_dir=quick_cache)
    assert again.root == first.root
    assert (again.model_dir / "model.safetensors").exists()


def test_losing_the_race_to_another_builder_uses_its_result(
    quick_cache: Path, quick_spec: DefaultTaskSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_build = assets_module._build

    def build_then_lose(root: Path, key: str, *args: object) -> None:
        real_build(root, key, *args)  # type: ignore[arg-type]
        # Another process renames its finished build into place first.
        shutil.copytree(root, root.parent / key)
        (root.parent / key / "winner").write_text("other process")

    monkeypatch.setattr(assets_module, "_build", build_then_lose)
    built = ensure_default_assets(quick_spec, cache_dir=quick_cache)
    assert (built.root / "winner").exists()
    assert os.listdir(quick_cache / "default_task") == [built.root.name]
