"""Build the default task's assets once and cache them on disk.

``ensure_default_assets()`` returns the paths of the warm-started model, its
tokenizer and the prompt dataset files. The first call builds them (a few
seconds of CPU) in a temporary directory under the cache and renames it into
place, so a directory under the cache is always complete, and two processes
building at once both end up using the same result. The directory name is a
hash of the spec, the builder version and the library versions.

Cache root: ``$HFSDK_CACHE_DIR`` or ``~/.cache/hfsdk``; assets live in
``<root>/default_task/<hash>/``.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from hfsdk import HfsdkError, cache_root
from hfsdk_tasks.build_once import build_once
from hfsdk_tasks.spec import DefaultTaskSpec
from hfsdk_tasks.task import task_rows, validation_rows

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)

SPEC_FILE = "spec.json"
Split = Literal["train", "val"]


@attrs.frozen(kw_only=True)
class DefaultAssets:
    """Paths of a built default task (all inside ``root``).

    ``model_dir`` is an HF ``LlamaForCausalLM`` directory (with the tokenizer
    files beside the weights); it also loads as ``AutoModelForTokenClassification``
    (critic: one value per token) or ``AutoModelForSequenceClassification``
    (reward/cost model) with ``num_labels=1`` — the new heads start untrained.
    """

    root: Path
    model_dir: Path
    tokenizer_dir: Path
    train_jsonl: Path
    train_parquet: Path
    val_jsonl: Path
    val_parquet: Path
    train_dataset_dir: Path
    """The training split saved with ``datasets.Dataset.save_to_disk``."""
    spec: DefaultTaskSpec
    build_info: dict[str, object] = attrs.field(eq=False)
    """What the build measured (warm-start loss, expected reward, seconds) and library versions."""

    @classmethod
    def at(cls, root: Path, spec: DefaultTaskSpec, build_info: dict[str, object]) -> DefaultAssets:
        """The asset paths of a build directory ``root``."""
        data = root / "data"
        return cls(
            root=root,
            model_dir=root / "model",
            tokenizer_dir=root / "tokenizer",
            train_jsonl=data / "train.jsonl",
            train_parquet=data / "train.parquet",
            val_jsonl=data / "val.jsonl",
            val_parquet=data / "val.parquet",
            train_dataset_dir=data / "train_dataset",
            spec=spec,
            build_info=build_info,
        )

    def required_paths(self) -> tuple[Path, ...]:
        """Files that must exist for the build to be usable."""
        return (
            self.model_dir / "config.json",
            self.model_dir / "model.safetensors",
            self.model_dir / "tokenizer.json",
            self.tokenizer_dir / "tokenizer.json",
            self.train_jsonl,
            self.train_parquet,
            self.val_jsonl,
            self.val_parquet,
            self.train_dataset_dir / "dataset_info.json",
            self.root / SPEC_FILE,
        )


def _library_versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }


def build_prompt_dataset(
    split: Split = "train", spec: DefaultTaskSpec | None = None
) -> datasets.Dataset:
    """The task's prompts as a ``datasets.Dataset`` with columns ``prompt`` and ``answer``."""
    import datasets

    spec = spec or DefaultTaskSpec()
    if split not in ("train", "val"):
        raise HfsdkError(f"split={split!r}; the default task has the splits 'train' and 'val'")
    rows = task_rows(spec) if split == "train" else validation_rows(spec)
    return datasets.Dataset.from_list(rows)


def ensure_default_assets(
    spec: DefaultTaskSpec | None = None, cache_dir: str | Path | None = None
) -> DefaultAssets:
    """The default task's assets, built on the first call and read from the cache after.

    ``cache_dir`` overrides the cache root (``$HFSDK_CACHE_DIR`` or ``~/.cache/hfsdk``).
    """
    spec = spec or DefaultTaskSpec()
    versions = _library_versions()
    base = (Path(cache_dir).expanduser() if cache_dir else cache_root()) / "default_task"
    final = base / spec.cache_key(versions)
    cached = _read_existing(final, spec)
    if cached is not None:
        return cached
    log.info("building the default task's model and data in %s (once)", final)
    build_once(
        final,
        lambda staging: _build(staging, final.name, spec, versions),
        complete=lambda root: _read_existing(root, spec) is not None,
    )
    built = _read_existing(final, spec)
    if built is None:
        raise HfsdkError(f"the default task build in {final} is incomplete; delete it and retry")
    return built


def _read_existing(root: Path, spec: DefaultTaskSpec) -> DefaultAssets | None:
    """The assets in ``root`` if it holds a complete build, else ``None`` (broken: removed)."""
    if not root.exists():
        return None
    try:
        info = json.loads((root / SPEC_FILE).read_text())
    except (OSError, ValueError):
        info = None
    assets = DefaultAssets.at(root, spec, info or {})
    if info is not None and all(p.exists() for p in assets.required_paths()):
        return assets
    # Only a completed build is ever renamed into place, so this one was damaged afterwards.
    log.warning("default task cache %s is incomplete; rebuilding it", root)
    shutil.rmtree(root, ignore_errors=True)
    return None


def _build(root: Path, key: str, spec: DefaultTaskSpec, versions: dict[str, str]) -> None:
    from hfsdk_tasks.tokenizer import train_tokenizer
    from hfsdk_tasks.warm_start import build_warm_started_model

    started = time.perf_counter()
    assets = DefaultAssets.at(root, spec, {})
    tokenizer = train_tokenizer(spec)
    tokenizer.save_pretrained(str(assets.tokenizer_dir))
    model, report = build_warm_started_model(spec, tokenizer)
    model.save_pretrained(str(assets.model_dir))
    # The tokenizer beside the weights, so every HF loader finds it in one place.
    tokenizer.save_pretrained(str(assets.model_dir))
    _write_datasets(assets, spec)
    info = {
        "spec": spec.to_json_dict(),
        "cache_key": key,
        "versions": versions,
        "warm_start": attrs.asdict(report),
        "build_seconds": time.perf_counter() - started,
        "num_parameters": sum(p.numel() for p in model.parameters()),
    }
    (root / SPEC_FILE).write_text(json.dumps(info, indent=2, sort_keys=True))


def _write_datasets(assets: DefaultAssets, spec: DefaultTaskSpec) -> None:
    assets.train_jsonl.parent.mkdir(parents=True, exist_ok=True)
    for split, jsonl, parquet in (
        ("train", assets.train_jsonl, assets.train_parquet),
        ("val", assets.val_jsonl, assets.val_parquet),
    ):
        dataset = build_prompt_dataset(split, spec)  # type: ignore[arg-type]
        dataset.to_json(str(jsonl), lines=True)
        dataset.to_parquet(str(parquet))
        if split == "train":
            dataset.save_to_disk(str(assets.train_dataset_dir))


def load_prompt_dataset(
    split: Split = "train", assets: DefaultAssets | None = None
) -> datasets.Dataset:
    """The cached split (parquet) of the default task as a ``datasets.Dataset``."""
    import datasets

    if split not in ("train", "val"):
        raise HfsdkError(f"split={split!r}; the default task has the splits 'train' and 'val'")
    assets = assets or ensure_default_assets()
    path = assets.train_parquet if split == "train" else assets.val_parquet
    return datasets.Dataset.from_parquet(str(path))
