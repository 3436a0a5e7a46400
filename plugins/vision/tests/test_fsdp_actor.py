"""The fsdp backend trains a VLM on rows with images through the ``qwen2_vl_images`` entry."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk import MODEL_INPUTS, Batch, HfsdkError
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_policy_losses.losses import reinforce_loss
from hfsdk_vision.batch_images import rollout_batch
from hfsdk_vision.forward_inputs import NAME
from hfsdk_vision.generation import sample
from hfsdk_vision.tokens import expand_placeholders

from .images import noise_image

# As in test_log_probs (float32, a cached decode against one full forward: ~2.4e-7 measured).
ATOL = 2e-5


@pytest.fixture(scope="module")
def batch(vlm) -> Batch:
    """6 rows: two samples each of a one-image, a two-image (other size) and a text prompt."""
    model, processor = vlm
    enc = processor(
        [
            expand_placeholders("<image> what colour is the square ?"),
            expand_placeholders("<image> <image> red"),
            expand_placeholders("square"),
        ],
        [[noise_image(0)], [noise_image(1, 40, 70), noise_image(2)], []],
    )
    ro = sample(model, enc, n=2, max_new_tokens=5, temperature=0.8, generator_seed=0)
    out = rollout_batch(ro)
    out.meta[MODEL_INPUTS] = NAME
    return out


def _actor(vlm_dir: Path, **overrides: object) -> ActorEngine:
    settings: dict[str, object] = {
        "model_path": str(vlm_dir),
        "mini_batch_size": 6,
        "micro_batch_size": 4,  # micro-batches of 4 and 2 rows: images must follow their rows
        "optim": OptimConfig(lr=1e-2),
        **overrides,
    }
    return ActorEngine(FSDPRoleConfig(**settings), role="actor")  # type: ignore[arg-type]


def test_actor_log_probs_equal_the_samplers(vlm_dir: Path, batch: Batch) -> None:
    actor = _actor(vlm_dir)
    assert type(actor.module).__name__ == "Qwen2VLForConditionalGeneration"
    old = actor.compute_log_prob(batch)["old_log_probs"]
    torch.testing.assert_close(old, batch["rollout_log_probs"], atol=ATOL, rtol=0)
    reference = ReferenceEngine(FSDPRoleConfig(model_path=str(vlm_dir)), role="reference")
    ref = reference.compute_ref_log_prob(batch)["ref_log_probs"]
    torch.testing.assert_close(ref, batch["rollout_log_probs"], atol=ATOL, rtol=0)


def test_packing_and_padding_removal_leave_image_rows_alone(vlm_dir: Path, batch: Batch) -> None:
    actor = _actor(vlm_dir, packing=True, remove_padding=True)
    old = actor.compute_log_prob(batch)["old_log_probs"]
    torch.testing.assert_close(old, batch["rollout_log_probs"], atol=ATOL, rtol=0)


def test_zeroed_pixels_change_the_actors_log_probs(vlm_dir: Path, batch: Batch) -> None:
    actor = _actor(vlm_dir)
    blank = batch.index(torch.arange(len(batch)))
    blank.tensors["pixel_values"] = torch.zeros_like(batch["pixel_values"])
    old = actor.compute_log_prob(blank)["old_log_probs"]
    image_rows = slice(0, 4)  # rows 4 and 5 have no image: unchanged
    assert (old[image_rows] - batch["rollout_log_probs"][image_rows]).abs().max() > 10 * ATOL
    torch.testing.assert_close(old[4:], batch["rollout_log_probs"][4:], atol=ATOL, rtol=0)


def test_a_broken_row_is_named_by_the_backend(vlm_dir: Path, batch: Batch) -> None:
    actor = _actor(vlm_dir, micro_batch_size=6)
    broken = batch.index(torch.arange(len(batch)))
    for key in ("pixel_values", "image_grid_thw", "images_per_row"):
        broken.tensors[key][1] = batch[key][2]
    with pytest.raises(HfsdkError, match=r"^row 1: 4 image tokens in the sequence but its 2"):
        actor.compute_log_prob(broken)


def test_the_update_reaches_the_vision_tower(vlm_dir: Path, batch: Batch) -> None:
    actor = _actor(vlm_dir)
    visual = {n: p.detach().clone() for n, p in actor.module.named_parameters() if "visual" in n}
    assert visual
    train = batch.index(torch.arange(len(batch)))
    # Reinforce the image rows' responses, discourage the text rows'.
    sign = torch.tensor([1.0, 1.0, 1.0, 1.0, -1.0, -1.0])[:, None]
    train.tensors["advantages"] = sign * train["response_mask"]
    metrics = actor.update_actor(train, ActorObjective(policy_loss=reinforce_loss))
    assert metrics["actor/grad_norm"] > 0
    moved = [
        n
        for n, p in actor.module.named_parameters()
        if n in visual and not torch.equal(p, visual[n])
    ]
    assert len(moved) == len(visual), (
        f"vision parameters left unchanged: {set(visual) - set(moved)}"
    )
    new = actor.compute_log_prob(train)["old_log_probs"]
    mask = train["response_mask"]
    change = ((new - train["rollout_log_probs"]) * mask).sum(-1) / mask.sum(-1)
    assert change[:4].mean() > 0 and change[4:].mean() < 0


def test_a_frozen_vision_tower_stays_while_the_language_model_trains(
    vlm_dir: Path, batch: Batch
) -> None:
    actor = _actor(vlm_dir, freeze_vision=True)
    before = {n: p.detach().clone() for n, p in actor.module.named_parameters()}
    visual = {n for n in before if ".visual." in f".{n}"}
    assert visual and all(not p.requires_grad for n, p in actor.module.named_parameters()
                          if n in visual)  # fmt: skip
    train = batch.index(torch.arange(len(batch)))
    train.tensors["advantages"] = torch.ones(len(train), 1) * train["response_mask"]
    assert (
        actor.update_actor(train, ActorObjective(policy_loss=reinforce_loss))["actor/grad_norm"] > 0
    )
    after = dict(actor.module.named_parameters())
    assert all(torch.equal(after[n], before[n]) for n in visual)
    assert any(not torch.equal(after[n], before[n]) for n in before if n not in visual)
    # The frozen tower has no optimizer state: only the language model's parameters do.
    assert actor.optimizer is not None
    stateful = {id(p) for p in actor.optimizer.state}
    assert not any(id(after[n]) in stateful for n in visual)
