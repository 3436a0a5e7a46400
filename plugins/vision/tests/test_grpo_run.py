"""GRPO end to end on the shapes images: in-process fsdp actor and reference, ``hf_vision``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hfsdk import HfsdkError, get_registry, load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_vision.model import ensure_tiny_vlm, load_tiny_vlm
from hfsdk_vision.shapes import shapes_rows, tokenizer_corpus, write_parquet

DOC = Path(__file__).resolve().parents[3] / "docs" / "multimodal.md"
IN_PROCESS = ["trainer.executor=local", "trainer.loggers=[jsonl]"]


def _overrides(model: Path, train: Path, steps: int) -> list[str]:
    return [
        f"actor.model_path={model}",
        f"data.train_files=[{train}]",
        "data.batch_size=8",
        "algorithm.n_samples_per_prompt=8",
        "actor.mini_batch_size=64",
        "actor.micro_batch_size=32",
        "rollout.backend=hf_vision",
        "rollout.max_response_length=4",
        "reward.functions=[{name: shapes}]",
        "trainer.executor=local",
        "trainer.loggers=[jsonl]",
        f"trainer.total_steps={steps}",
    ]


def _docs_config(tmp_path: Path, model: Path, train: Path) -> Path:
    """docs/multimodal.md's ``shapes.yaml`` as written, with the paths filled in."""
    (text,) = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    text = text.replace("MODEL_DIR", str(model)).replace("TRAIN_FILE", str(train))
    path = tmp_path / "shapes.yaml"
    path.write_text(text)
    return path


@pytest.mark.heavy  # 7 s on an idle moment, 50-130 s while the 2-core machine was shared
def test_grpo_trains_the_tiny_vlm_on_images(tmp_path: Path) -> None:
    model = ensure_tiny_vlm(tokenizer_corpus(), cache_dir=tmp_path)
    train = write_parquet(shapes_rows(32, seed=0), tmp_path / "train.parquet")
    config_file = _docs_config(tmp_path, model, train)
    config = load_run_config("grpo", str(config_file), IN_PROCESS)
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert len(rows) == 2
    for row in rows:
        assert 0.0 <= row["reward/shapes"] <= 1.0
        # The training forward saw the sampler's pixels, grids and M-RoPE positions: without
        # them the untrained model's log-probs move by > 1e-3 (test_fsdp_actor).
        assert row["rollout/log_prob_diff_max"] < 1e-5
    # 128 samples at the untrained model's ~6% hit rate (measured): P(no reward) ~ 4e-4.
    assert sum(row["reward/shapes"] for row in rows) > 0
    rewarded = [row for row in rows if row["reward/shapes"] > 0]
    assert all(row["actor/grad_norm"] > 0 for row in rewarded)
    assert rows[1]["actor/kl"] > 0  # the first update moved the policy off the reference
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["reward/shapes"] for r in logged if "reward/shapes" in r] == [
        r["reward/shapes"] for r in rows
    ]
    # The export loads with its processor (the image processor's settings copied along).
    exported, processor = load_tiny_vlm(tmp_path / "run" / "checkpoints" / "step_2" / "actor_hf")
    assert (
        processor.merge_size == 2 and type(exported).__name__ == "Qwen2VLForConditionalGeneration"
    )


@pytest.mark.parametrize("backend", ["hf", "vllm"])
def test_a_text_rollout_is_refused_for_image_prompts(
    tmp_path: Path, vlm_dir: Path, backend: str
) -> None:
    if backend not in get_registry("rollout_backends"):
        pytest.skip(f"the {backend} rollout is not installed")
    train = write_parquet(shapes_rows(4, seed=0), tmp_path / "train.parquet")
    overrides = [o for o in _overrides(vlm_dir, train, 1) if not o.startswith("rollout.")]
    overrides.append(f"rollout.backend={backend}")
    with pytest.raises(
        HfsdkError, match=rf"carry images .* rollout.backend={backend} generates from text only"
    ):
        Trainer(load_run_config("grpo", None, overrides), tmp_path / "run", quiet=True)


def test_an_image_that_does_not_decode_is_named_before_training(
    tmp_path: Path, vlm_dir: Path
) -> None:
    rows = shapes_rows(3, seed=0)
    rows[2]["images"] = [{"bytes": b"not a png", "path": None}]
    train = write_parquet(rows, tmp_path / "train.parquet")
    config = load_run_config("grpo", None, _overrides(vlm_dir, train, 1))
    with pytest.raises(HfsdkError, match=r"^train data: row 2, image 0 could not be decoded"):
        Trainer(config, tmp_path / "run", quiet=True)


@pytest.mark.parametrize("backend", ["hf", "hf_vision"])
def test_trls_single_image_column_is_refused_not_left_out(
    tmp_path: Path, vlm_dir: Path, backend: str
) -> None:
    rows = shapes_rows(3, seed=0)
    for row in rows:
        row["image"] = row.pop("images")[0]
    train = write_parquet(rows, tmp_path / "train.parquet")
    overrides = [*_overrides(vlm_dir, train, 1), f"rollout.backend={backend}"]
    with pytest.raises(HfsdkError, match=r"TRL's single 'image' column, which a run does not"):
        Trainer(load_run_config("grpo", None, overrides), tmp_path / "run", quiet=True)


def test_the_docs_config_resolves(tmp_path: Path, vlm_dir: Path) -> None:
    train = write_parquet(shapes_rows(2, seed=0), tmp_path / "train.parquet")
    config = load_run_config("grpo", str(_docs_config(tmp_path, vlm_dir, train)), IN_PROCESS)
    assert config.rollout.backend == "hf_vision"
    assert config.actor.model_path == str(vlm_dir)
