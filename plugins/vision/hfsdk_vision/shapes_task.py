"""The ``shapes`` task: ``hfsdk run --algo grpo --task shapes`` (a tiny VLM learns to look).

Built once and cached (``$HFSDK_CACHE_DIR/vision/shapes-<key>/``): the tiny Qwen2-VL with
its processor (:mod:`hfsdk_vision.model`), warm-started, and the train and validation files
in verl's multimodal layout (:mod:`hfsdk_vision.shapes`).

The warm start teaches the answer's form and nothing else: every image is paired with each
of the four colours as the answer, so the target is the uniform distribution over them,
whatever the image shows. The warm model answers a colour (one in four right) and has not
learnt to read the image; the reward rising above 1 in 4 under GRPO is the model learning
to look. The answer is one token (``rollout.max_response_length: 1``): the reward reads the
first word, and a longer response only adds tokens the advantage pushes without reason.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import attrs

import hfsdk
from hfsdk_tasks import build_once
from hfsdk_vision.model import TinyVLMSpec, load_tiny_vlm, save_tiny_vlm
from hfsdk_vision.shapes import COLOURS, PROMPT, draw, shapes_rows, tokenizer_corpus, write_parquet

BUILDER_VERSION = 1
TASK_NAME = "shapes"


@attrs.frozen(kw_only=True)
class ShapesTaskSpec:
    """The model, its warm start and the data of the ``shapes`` task."""

    model: TinyVLMSpec = attrs.field(factory=TinyVLMSpec)
    warm_start_steps: int = 30
    warm_start_images: int = 4
    """Images per warm-start step; each appears once with each colour (16 rows)."""
    warm_start_lr: float = 3e-3
    train_rows: int = 512
    val_rows: int = 64
    seed: int = 0

    def cache_key(self) -> str:
        """A short hash of the spec and the builder's version."""
        text = json.dumps({"spec": attrs.asdict(self), "v": BUILDER_VERSION}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def warm_start(model: Any, processor: Any, spec: ShapesTaskSpec) -> float:
    """Fit ``model`` in place to answer each colour equally often, whatever the image; returns
    the last step's loss (ln 4 ≈ 1.386 is the optimum)."""
    import torch

    from hfsdk_vision.log_probs import response_log_probs
    from hfsdk_vision.tokens import expand_placeholders

    names = list(COLOURS)
    rng = random.Random(spec.seed)
    text = expand_placeholders(PROMPT)
    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=spec.warm_start_lr)
        model.train()
        loss = torch.zeros(())
        for _ in range(spec.warm_start_steps):
            images = [draw(*rng.sample(names, 2), rng, spec.model.image_size)
                      for _ in range(spec.warm_start_images)]  # fmt: skip
            pairs = [(image, name) for image in images for name in names]
            inputs = processor([f"{text} {name}" for _, name in pairs], [[i] for i, _ in pairs])
            loss = -response_log_probs(model, response_width=1, **inputs).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
    return float(loss.detach())


def build_shapes_assets(directory: Path, spec: ShapesTaskSpec) -> None:
    """Write the warm-started model (``model/``), ``train.parquet``, ``val.parquet`` and, last,
    ``info.json`` (which lists every file written before it) into ``directory``."""
    model_dir = save_tiny_vlm(directory / "model", tokenizer_corpus(), spec.model)
    model, processor = load_tiny_vlm(model_dir)
    loss = warm_start(model, processor, spec)
    model.save_pretrained(model_dir)
    write_parquet(shapes_rows(spec.train_rows, seed=spec.seed), directory / "train.parquet")
    write_parquet(shapes_rows(spec.val_rows, seed=spec.seed + 1), directory / "val.parquet")
    files = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())
    info = {"spec": attrs.asdict(spec), "warm_start_loss": loss, "files": files}
    (directory / "info.json").write_text(json.dumps(info, indent=1))


def shapes_assets_complete(directory: Path) -> bool:
    """Whether ``directory`` holds a finished build: ``info.json`` and every file it lists.

    Every file counts, not only ``info.json``: a cache that lost ``train.parquet`` after the
    build would otherwise fail far away, blamed on ``data.train_files``. (A build from before
    the list existed has none and is rebuilt once.)
    """
    try:
        files = json.loads((directory / "info.json").read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return isinstance(files, list) and all((directory / name).is_file() for name in files)


def ensure_shapes_assets(spec: ShapesTaskSpec | None = None) -> Path:
    """The task's cached directory, built on first use (see :func:`build_shapes_assets`) and
    rebuilt when a file of it is missing."""
    spec = spec or ShapesTaskSpec()
    final = hfsdk.cache_root() / "vision" / f"shapes-{spec.cache_key()}"
    return build_once(
        final, lambda staging: build_shapes_assets(staging, spec), complete=shapes_assets_complete
    )


def shapes_settings(root: Path) -> dict[str, Any]:
    """What ``--task shapes`` puts under the user's config."""
    return {
        "actor": {
            "model_path": str(root / "model"),
            "optim": {"lr": 3e-3},
            "mini_batch_size": 64,
            "micro_batch_size": 64,
        },
        "data": {
            "train_files": [str(root / "train.parquet")],
            "val_files": [str(root / "val.parquet")],
            "batch_size": 8,
        },
        "algorithm": {"n_samples_per_prompt": 8},
        "rollout": {"backend": "hf_vision", "max_response_length": 1},
        "reward": {"functions": [{"name": TASK_NAME}]},
        "trainer": {"total_steps": 40},
    }


def _assets(model: str = "warm", data: str = "prompts") -> hfsdk.TaskAssets:
    root = ensure_shapes_assets()
    return hfsdk.TaskAssets(
        model_dir=root / "model",
        tokenizer_dir=root / "model",
        train_files=(str(root / "train.parquet"),),
        val_files=(str(root / "val.parquet"),),
        root=root,
    )


def shapes_task() -> hfsdk.Task:
    """The registry entry of the ``shapes`` task."""
    return hfsdk.Task(
        summary="name the colour of the largest shape in an image: a tiny VLM (docs/multimodal.md)",
        assets=_assets,
        settings=lambda: shapes_settings(ensure_shapes_assets()),
    )
