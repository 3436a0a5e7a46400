"""``hf_vision``: generation from image prompts through the rollout contract."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hfsdk import MODEL_INPUTS, Batch, DataConfig, HfsdkError, build_rollout
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_datasets import PromptLoader
from hfsdk_vision.forward_inputs import NAME
from hfsdk_vision.invariant import check_image_tokens
from hfsdk_vision.rollout import VisionRollout, VisionRolloutConfig
from hfsdk_vision.shapes import shapes_rows

ATOL = 2e-5  # as in test_log_probs: a cached decode against one full forward, float32


@pytest.fixture(scope="module")
def actor(vlm_dir: Path) -> ActorEngine:
    return ActorEngine(
        FSDPRoleConfig(model_path=str(vlm_dir), mini_batch_size=6, micro_batch_size=6),
        role="actor",
    )


def _prompts(actor: ActorEngine, count: int = 3) -> Batch:
    """Shapes rows (verl's layout) through the core's prompt loader, as a run loads them."""
    loader = PromptLoader(
        shapes_rows(count, seed=1), actor.tokenizer, DataConfig(batch_size=count), seed=0
    )
    return loader.next_batch()


def test_the_registered_rollout_samples_what_the_actor_scores(actor: ActorEngine) -> None:
    config = VisionRolloutConfig(max_response_length=6, temperature=0.8)
    rollout = build_rollout(config, actor)
    assert isinstance(rollout, VisionRollout)
    torch.manual_seed(0)
    out = rollout.generate_sequences(_prompts(actor), n=2)
    assert len(out) == 6 and out["responses"].shape == (6, 6)
    assert out.meta[MODEL_INPUTS] == NAME and out.meta["temperature"] == 0.8
    assert out["images_per_row"].tolist() == [1] * 6
    assert list(out["answer"]) == [a for a in _prompts(actor)["answer"] for _ in range(2)]
    config_of = actor.module.config
    ids = out["input_ids"]
    grids = out["image_grid_thw"].reshape(-1, 3)
    check_image_tokens(
        ids, grids, out["images_per_row"], image_token_id=config_of.image_token_id,
        merge_size=config_of.vision_config.spatial_merge_size, attention_mask=out["attention_mask"],
    )  # fmt: skip
    # The two samples of a prompt share its pixels; different prompts' images differ.
    assert torch.equal(out["pixel_values"][0], out["pixel_values"][1])
    assert not torch.equal(out["pixel_values"][0], out["pixel_values"][2])
    old = actor.compute_log_prob(out)["old_log_probs"]
    torch.testing.assert_close(old, out["rollout_log_probs"], atol=ATOL, rtol=0)
    assert out["response_mask"].sum() > 6


def test_greedy_samples_of_one_prompt_agree(actor: ActorEngine) -> None:
    rollout = build_rollout(VisionRolloutConfig(max_response_length=4), actor)
    out = rollout.generate_sequences(_prompts(actor, 2), n=2, greedy=True)
    assert out.meta["temperature"] == 1.0
    assert torch.equal(out["responses"][0], out["responses"][1])


def test_temperature_zero_decodes_greedily_when_the_batch_asks_to_sample(
    actor: ActorEngine,
) -> None:
    rollout = build_rollout(VisionRolloutConfig(max_response_length=4, temperature=0.0), actor)
    batch = _prompts(actor, 2).repeat(2, interleave=True)
    batch.meta.update(greedy=False, n=1)  # what the trainer's generation input carries
    out = rollout.generate_sequences(batch)
    assert out.meta["temperature"] == 1.0
    assert torch.equal(out["responses"][0], out["responses"][1])
    assert torch.equal(out["responses"][2], out["responses"][3])


def test_prompts_without_an_images_column_have_no_images(actor: ActorEngine) -> None:
    """Text-only validation files beside image train files: no column is no image per row
    (the run died at its first validation); '<image>' placeholders without images are still
    refused, and so is a batch without prompt text."""
    rollout = build_rollout(VisionRolloutConfig(), actor)
    text = [{"prompt": [{"role": "user", "content": "what colour ?"}], "answer": "red"}] * 2
    loader = PromptLoader(text, actor.tokenizer, DataConfig(batch_size=2), seed=0)
    prompts = loader.next_batch()
    assert "images" not in prompts.non_tensor_keys
    encoded = rollout.encode(prompts)
    assert encoded["images_per_row"].tolist() == [0, 0]
    assert encoded["pixel_values"].shape[0] == 0
    with_placeholders = _prompts(actor)
    with_placeholders.pop(non_tensor_keys=["images"])
    with pytest.raises(HfsdkError, match=r"has 1 image placeholders but 0 images were given"):
        rollout.generate_sequences(with_placeholders)
    # Neither prompt text nor token ids (with ids, it is a token-in batch).
    prompts.pop(tensor_keys=["input_ids", "attention_mask"], non_tensor_keys=["rendered_prompt"])
    with pytest.raises(HfsdkError, match=r"needs a prompt column 'rendered_prompt'"):
        rollout.encode(prompts)


def test_an_images_value_that_is_not_a_list_is_refused(actor: ActorEngine) -> None:
    rollout = build_rollout(VisionRolloutConfig(), actor)
    prompts = _prompts(actor, 2)
    # A path per row, not a list of them.
    prompts.non_tensors["images"] = np.array(["a.png", "b.png"], dtype=object)
    uid = prompts["uid"][0]
    with pytest.raises(HfsdkError) as err:
        rollout.encode(prompts)
    assert str(err.value) == (
        f"row {uid}: images must be a list of images per row (got a str); wrap it in a list"
    )


def test_a_lora_actor_generates_with_its_merged_weights(vlm_dir: Path) -> None:
    """A peft-wrapped actor has no plain HF module: the rollout fills a generation module with
    the merged weights (base + scale·B·A), checked against the actor's probes of each merge,
    and what it samples is what the actor (adapters on) scores."""
    from hfsdk_backend_common.lora_config import LoraConfig

    lora = LoraConfig(rank=4, alpha=8.0, target_modules=("q_proj", "v_proj"))
    actor = ActorEngine(
        FSDPRoleConfig(model_path=str(vlm_dir), mini_batch_size=6, micro_batch_size=6, lora=lora),
        role="actor",
    )
    with torch.no_grad():  # what an update of the adapters does (B starts at 0)
        generator = torch.Generator().manual_seed(1)
        for name, param in actor.module.named_parameters():
            if "lora_B" in name:
                param.copy_(0.3 * torch.randn(param.shape, generator=generator))
    rollout = build_rollout(VisionRolloutConfig(max_response_length=4, temperature=0.8), actor)
    torch.manual_seed(0)
    out = rollout.generate_sequences(_prompts(actor), n=2)
    merges = actor.weight_probes
    assert merges and all(".visual." not in f".{name}" for name in merges)  # the LM's only
    old = actor.compute_log_prob(out)["old_log_probs"]
    torch.testing.assert_close(old, out["rollout_log_probs"], atol=ATOL, rtol=0)


def test_a_bfloat16_actor_generates_from_a_copy_in_its_compute_dtype(vlm_dir: Path) -> None:
    actor = ActorEngine(
        FSDPRoleConfig(
            model_path=str(vlm_dir), mini_batch_size=6, micro_batch_size=6, dtype="bfloat16"
        ),
        role="actor",
    )
    rollout = build_rollout(VisionRolloutConfig(max_response_length=4), actor)
    out = rollout.generate_sequences(_prompts(actor), n=2, greedy=True)
    assert out["responses"].shape == (6, 4) and out.meta[MODEL_INPUTS] == NAME
    old = actor.compute_log_prob(out)["old_log_probs"]
    # bfloat16 has 8 bits of mantissa: the sampler's and the actor's forwards agree to ~1e-2.
    mask = out["response_mask"].bool()
    assert (old - out["rollout_log_probs"])[mask].abs().max() < 0.1


def test_relative_image_paths_decode_from_the_data_files_folder(
    actor: ActorEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk_datasets import load_prompt_dataset
    from hfsdk_vision.shapes import write_parquet

    rows = shapes_rows(2, seed=1)
    (tmp_path / "img").mkdir()
    for i, row in enumerate(rows):
        (tmp_path / "img" / f"{i}.png").write_bytes(row["images"][0]["bytes"])
    by_bytes = PromptLoader(rows, actor.tokenizer, DataConfig(batch_size=2, shuffle=False), seed=0)
    for i, row in enumerate(rows):
        row["images"] = [f"img/{i}.png"]
    data = write_parquet(rows, tmp_path / "train.parquet")
    monkeypatch.chdir(tmp_path / "img")
    dataset = load_prompt_dataset([str(data)], "prompt")
    by_path = PromptLoader(
        dataset, actor.tokenizer, DataConfig(batch_size=2, shuffle=False), seed=0
    )
    rollout = build_rollout(VisionRolloutConfig(), actor)
    assert isinstance(rollout, VisionRollout)
    expected = rollout.encode(by_bytes.next_batch())
    prompts = by_path.next_batch()
    assert torch.equal(rollout.encode(prompts)["pixel_values"], expected["pixel_values"])
    row = {key: prompts[key][0] for key in prompts.non_tensor_keys}
    assert rollout.row_images(row) == [str(tmp_path / "img" / "0.png")]
