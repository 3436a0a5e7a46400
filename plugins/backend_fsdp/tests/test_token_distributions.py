"""A reference's top-k log-probs per position and the actor's log-probs at given token ids."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk import REF_TOP_K, Batch, TokenIdsLossTerm, aggregate_loss
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine, ResponseExtras
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_policy_losses.losses import reinforce_loss

PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]
TEMPERATURE = 0.7


@pytest.fixture
def sampled(model_dir: Path, make_prompts: Callable[..., Batch]) -> Batch:
    """8 responses of uneven length (temperature 0.7) to 4 prompts."""
    actor = ActorEngine(FSDPRoleConfig(model_path=str(model_dir)), role="actor")
    rollout = HFRollout(HFRolloutConfig(max_response_length=5, n=2, temperature=TEMPERATURE), actor)
    return rollout.generate_sequences(make_prompts(PROMPTS))


def _full_log_softmax(engine: ActorEngine | ReferenceEngine, batch: Batch) -> torch.Tensor:
    """(B, R, V): each row's response positions from an unpadded forward of that row alone."""
    prompt_width = batch["prompts"].shape[1]
    width = batch["responses"].shape[1]
    rows = []
    for row in range(len(batch)):
        prompt = batch["prompts"][row][batch["attention_mask"][row, :prompt_width] == 1]
        ids = torch.cat([prompt, batch["responses"][row]])[None]
        with torch.no_grad():
            logits = engine.module(input_ids=ids).logits[
                0, len(prompt) - 1 : len(prompt) - 1 + width
            ]
        rows.append(torch.log_softmax(logits.float() / TEMPERATURE, -1))
    return torch.stack(rows)


@pytest.mark.parametrize("packing", [False, True])
def test_reference_top_k_are_the_largest_log_probs_of_each_position(
    model_dir: Path, sampled: Batch, packing: bool
) -> None:
    reference = ReferenceEngine(
        FSDPRoleConfig(model_path=str(model_dir), packing=packing), role="teacher"
    )
    asked = sampled.select()
    asked.meta[REF_TOP_K] = 3
    out = reference.compute_ref_log_prob(asked)
    plain = reference.compute_ref_log_prob(sampled)
    assert set(plain.tensor_keys) == {"ref_log_probs"}  # nothing extra unless asked
    torch.testing.assert_close(out["ref_log_probs"], plain["ref_log_probs"])
    full = _full_log_softmax(reference, sampled)
    values, ids = full.topk(3, dim=-1)
    mask = sampled["response_mask"].bool()
    assert out["ref_top_k_log_probs"].shape == (len(sampled), sampled["responses"].shape[1], 3)
    torch.testing.assert_close(out["ref_top_k_log_probs"][mask], values[mask], atol=1e-5, rtol=1e-4)
    assert torch.equal(out["ref_top_k_ids"][mask], ids[mask])
    assert out["ref_top_k_ids"].dtype == torch.int64
    # Masked positions are 0, as the log-probs are.
    assert out["ref_top_k_log_probs"][~mask].eq(0).all() and out["ref_top_k_ids"][~mask].eq(0).all()


@pytest.mark.parametrize("packing", [False, True])
def test_actor_gathers_its_log_probs_at_given_ids_with_gradient(
    model_dir: Path, sampled: Batch, packing: bool
) -> None:
    actor = ActorEngine(FSDPRoleConfig(model_path=str(model_dir), packing=packing), role="actor")
    generator = torch.Generator().manual_seed(0)
    vocab = actor.module.config.vocab_size
    shape = (*sampled["responses"].shape, 4)
    batch = sampled.select()
    batch["some_ids"] = torch.randint(0, vocab, shape, generator=generator)
    extras = ResponseExtras(ids_keys=("some_ids",))
    actor._response_outputs(batch, TEMPERATURE, "none", extras)
    got = extras.ids_log_probs["some_ids"]
    assert got.requires_grad
    full = _full_log_softmax(actor, sampled)
    expected = full.gather(-1, batch["some_ids"])
    mask = sampled["response_mask"].bool()
    torch.testing.assert_close(got.detach()[mask], expected[mask], atol=1e-5, rtol=1e-4)


def _term_loss(
    *, log_probs: torch.Tensor, response_mask: torch.Tensor, aggregation: object, **_: object
) -> tuple:
    """Minus the mean log-prob of the given ids: pushes probability onto them."""
    return aggregate_loss(-log_probs.mean(dim=-1), response_mask, aggregation), {"ids_mean": 1.0}


def test_update_actor_trains_a_token_term(model_dir: Path, sampled: Batch) -> None:
    actor = ActorEngine(
        FSDPRoleConfig(
            model_path=str(model_dir), mini_batch_size=8, micro_batch_size=4,
            optim=OptimConfig(lr=1e-2),
        ),
        role="actor",
    )  # fmt: skip
    batch = sampled.union(actor.compute_log_prob(sampled))
    batch["advantages"] = torch.zeros_like(batch["old_log_probs"])  # no policy gradient
    batch["target_ids"] = torch.full((*batch["responses"].shape, 1), 7, dtype=torch.int64)
    term = TokenIdsLossTerm(name="push", ids_key="target_ids", fn=_term_loss, coef=1.0)
    objective = ActorObjective(policy_loss=reinforce_loss, token_terms=(term,))
    mask = batch["response_mask"].bool()
    before = _full_log_softmax(actor, batch)[..., 7][mask].mean()
    metrics = actor.update_actor(batch, objective)
    after = _full_log_softmax(actor, batch)[..., 7][mask].mean()
    assert after > before + 0.1
    # The term's loss aggregated over the mini-batch (two micro-batches' shares).
    assert metrics["actor/push"] == pytest.approx(float(-before), rel=1e-3)
    assert metrics["actor/push/ids_mean"] == pytest.approx(1.0)
