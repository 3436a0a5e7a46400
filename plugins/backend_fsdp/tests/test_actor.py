"""The actor and reference engines: log-probs, entropy and the policy update."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_policy_losses.losses import reinforce_loss

PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]


def _actor(model_dir: Path, **overrides: object) -> ActorEngine:
    settings: dict[str, object] = {
        "model_path": str(model_dir),
        "mini_batch_size": 8,
        "micro_batch_size": 8,
        "optim": OptimConfig(lr=1e-3),
        **overrides,
    }
    config = FSDPRoleConfig(**settings)  # type: ignore[arg-type]
    return ActorEngine(config, role="actor")


@pytest.fixture
def rollout_batch(model_dir: Path, make_prompts: Callable[..., Batch]) -> Batch:
    """8 sampled responses (temperature 0.7) to 4 prompts, with old log-probs."""
    torch.manual_seed(0)
    actor = _actor(model_dir)
    rollout = HFRollout(HFRolloutConfig(max_response_length=5, n=2, temperature=0.7), actor)
    batch = rollout.generate_sequences(make_prompts(PROMPTS))
    return batch.union(actor.compute_log_prob(batch))


def _params(engine: ActorEngine) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in engine.module.named_parameters()}


def test_log_probs_match_an_unpadded_forward_of_each_sequence(
    model_dir: Path, rollout_batch: Batch
) -> None:
    actor = _actor(model_dir)
    prompt_width = rollout_batch["prompts"].shape[1]
    for row in range(len(rollout_batch)):
        prompt = rollout_batch["prompts"][row][
            rollout_batch["attention_mask"][row, :prompt_width] == 1
        ]
        length = int(rollout_batch["response_mask"][row].sum())
        response = rollout_batch["responses"][row, :length]
        ids = torch.cat([prompt, response])[None]
        with torch.no_grad():
            logits = actor.module(input_ids=ids).logits[0, len(prompt) - 1 : -1] / 0.7
        expected = torch.log_softmax(logits, -1).gather(-1, response[:, None])[:, 0]
        torch.testing.assert_close(
            rollout_batch["old_log_probs"][row, :length], expected, atol=1e-5, rtol=1e-4
        )
        # Masked positions are exactly 0.
        assert rollout_batch["old_log_probs"][row, length:].eq(0).all()
        assert rollout_batch["entropys"][row, length:].eq(0).all()
        assert (rollout_batch["entropys"][row, :length] > 0).all()


def test_reference_is_frozen_and_agrees_with_the_initial_actor(
    model_dir: Path, rollout_batch: Batch
) -> None:
    reference = ReferenceEngine(FSDPRoleConfig(model_path=str(model_dir)), role="reference")
    assert reference.optimizer is None
    assert not any(p.requires_grad for p in reference.module.parameters())
    assert not reference.module.training
    out = reference.compute_ref_log_prob(rollout_batch)
    assert out.keys() == ["ref_log_probs"]
    torch.testing.assert_close(out["ref_log_probs"], rollout_batch["old_log_probs"])


def test_positive_advantages_raise_the_chosen_tokens_probability(
    model_dir: Path, rollout_batch: Batch
) -> None:
    actor = _actor(model_dir)
    batch = rollout_batch
    # The first two prompts' responses are reinforced, the last two's discouraged.
    sign = torch.tensor([1.0] * 4 + [-1.0] * 4)[:, None]
    batch["advantages"] = sign * batch["response_mask"]
    metrics = actor.update_actor(batch, ActorObjective(policy_loss=reinforce_loss))
    assert {"actor/pg_loss", "actor/entropy", "actor/grad_norm", "actor/lr", "actor/ppo_kl"} <= set(
        metrics
    )
    assert metrics["actor/lr"] == pytest.approx(1e-3)
    assert "actor/kl" not in metrics  # no reference log-probs in the batch
    new = actor.compute_log_prob(batch)["old_log_probs"]
    mask = batch["response_mask"]
    change = ((new - batch["old_log_probs"]) * mask).sum(-1) / mask.sum(-1)
    assert change[:4].mean() > 0.05 and change[4:].mean() < -0.05
    assert actor.update_calls == 1


def test_micro_batching_accumulates_to_the_same_step(model_dir: Path, rollout_batch: Batch) -> None:
    rollout_batch["advantages"] = torch.randn(8, 1) * rollout_batch["response_mask"]
    objective = ActorObjective(policy_loss=reinforce_loss, loss_agg_mode="seq-mean-token-mean")
    whole = _actor(model_dir, micro_batch_size=8)
    pieces = _actor(model_dir, micro_batch_size=3)
    loss_whole = whole.update_actor(rollout_batch, objective)["actor/pg_loss"]
    loss_pieces = pieces.update_actor(rollout_batch, objective)["actor/pg_loss"]
    assert loss_pieces == pytest.approx(loss_whole, rel=1e-5)
    for name, value in _params(whole).items():
        torch.testing.assert_close(_params(pieces)[name], value, atol=1e-6, rtol=1e-5)


def test_minibatches_and_epochs_set_the_number_of_optimizer_steps(
    model_dir: Path, rollout_batch: Batch
) -> None:
    rollout_batch["advantages"] = torch.randn(8, 1) * rollout_batch["response_mask"]
    actor = _actor(model_dir, mini_batch_size=4, micro_batch_size=2, ppo_epochs=3, shuffle=True)
    actor.update_actor(rollout_batch, ActorObjective(policy_loss=reinforce_loss))
    steps = {int(s["step"]) for s in actor.optimizer.state_dict()["state"].values()}
    assert steps == {2 * 3}


def test_kl_loss_pulls_towards_the_reference(model_dir: Path, rollout_batch: Batch) -> None:
    batch = rollout_batch
    batch["ref_log_probs"] = batch["old_log_probs"].clone()
    batch["advantages"] = torch.zeros_like(batch["response_mask"])
    actor = _actor(model_dir)
    objective = ActorObjective(policy_loss=reinforce_loss, kl_estimator="k1", kl_loss_coef=1.0)
    metrics = actor.update_actor(batch, objective)
    # One mini-batch: the KL is measured before the step, where actor == reference.
    assert metrics["actor/kl"] == pytest.approx(0.0, abs=1e-6)
    # k1's gradient lowers the sampled tokens' log-probs (towards the rest of the reference).
    new = actor.compute_log_prob(batch)["old_log_probs"]
    mask = batch["response_mask"]
    assert ((new - batch["old_log_probs"]) * mask).sum() < 0
    with pytest.raises(HfsdkError, match="ref_log_probs"):
        actor.update_actor(
            batch.select(tensor_keys=[k for k in batch.tensor_keys if k != "ref_log_probs"]),
            objective,
        )
    with pytest.raises(ValueError, match="needs a kl_estimator"):
        ActorObjective(policy_loss=reinforce_loss, kl_loss_coef=0.1)


def test_entropy_bonus_raises_entropy(model_dir: Path, rollout_batch: Batch) -> None:
    rollout_batch["advantages"] = torch.zeros_like(rollout_batch["response_mask"])
    actor = _actor(model_dir)
    before = actor.compute_log_prob(rollout_batch)["entropys"].sum()
    for _ in range(3):
        actor.update_actor(
            rollout_batch, ActorObjective(policy_loss=reinforce_loss, entropy_coef=1.0)
        )
    assert actor.compute_log_prob(rollout_batch)["entropys"].sum() > before


def test_non_finite_gradients_skip_the_step(model_dir: Path, rollout_batch: Batch) -> None:
    rollout_batch["advantages"] = torch.full_like(rollout_batch["response_mask"], float("nan"))
    actor = _actor(model_dir)
    before = _params(actor)
    metrics = actor.update_actor(rollout_batch, ActorObjective(policy_loss=reinforce_loss))
    assert metrics["actor/skipped_steps"] == 1.0
    for name, value in _params(actor).items():
        torch.testing.assert_close(value, before[name])


def test_missing_keys_are_named(model_dir: Path, rollout_batch: Batch) -> None:
    actor = _actor(model_dir)
    with pytest.raises(HfsdkError, match=r"needs batch keys \['advantages'\]"):
        actor.update_actor(rollout_batch, ActorObjective(policy_loss=reinforce_loss))
    with pytest.raises(TypeError, match="callable loss function"):
        ActorObjective(policy_loss="ppo_clip")  # type: ignore[arg-type]


def test_bfloat16_compute_keeps_float32_master_weights(
    model_dir: Path, rollout_batch: Batch
) -> None:
    actor = _actor(model_dir, dtype="bfloat16")
    reference = ReferenceEngine(
        FSDPRoleConfig(model_path=str(model_dir), dtype="bfloat16"), role="reference"
    )
    assert next(actor.module.parameters()).dtype == torch.float32
    assert next(reference.module.parameters()).dtype == torch.bfloat16
    mask = rollout_batch["response_mask"]
    low = actor.compute_log_prob(rollout_batch)["old_log_probs"]
    assert low.dtype == torch.float32
    # Close to the float32 log-probs, but computed in bfloat16 (not identical).
    difference = ((low - rollout_batch["old_log_probs"]).abs() * mask).max()
    assert 0 < difference < 0.1
    ref = reference.compute_ref_log_prob(rollout_batch)["ref_log_probs"]
    assert ((ref - rollout_batch["old_log_probs"]).abs() * mask).max() < 0.1
    rollout_batch["advantages"] = mask.clone()
    metrics = actor.update_actor(rollout_batch, ActorObjective(policy_loss=reinforce_loss))
    assert metrics["actor/skipped_steps"] == 0.0


def test_a_state_taken_before_the_first_step_does_not_step_the_optimizer(
    model_dir: Path, rollout_batch: Batch, tmp_path: Path
) -> None:
    """torch's optimizer state dict gives an unstepped AdamW a step at lr 0, which counted:
    the first real update then moved the weights 0.74 lr instead of lr. A snapshot or a
    checkpoint before the first update (and a resume from one) leaves the step alone."""
    batch = rollout_batch
    batch["advantages"] = torch.ones_like(batch["response_mask"], dtype=torch.float32)
    objective = ActorObjective(policy_loss=reinforce_loss)
    plain = _actor(model_dir)
    plain.update_actor(batch, objective)
    expected = _params(plain)
    snapshotted = _actor(model_dir)
    state = snapshotted.state_dict()
    snapshotted.save_checkpoint(tmp_path)
    snapshotted.update_actor(batch, objective)
    resumed = _actor(model_dir)
    resumed.load_checkpoint(tmp_path)
    resumed.update_actor(batch, objective)
    restored = _actor(model_dir)
    restored.load_state_dict(state)
    restored.update_actor(batch, objective)
    for engine in (snapshotted, resumed, restored):
        for name, value in _params(engine).items():
            torch.testing.assert_close(value, expected[name], rtol=0, atol=1e-7)


def test_on_policy_kl_is_the_per_token_mean_whatever_the_loss_agg_mode(
    model_dir: Path, rollout_batch: Batch
) -> None:
    """Without old log-probs nothing replaces the actor's ``actor/kl`` (docs/training.md: the
    mean per-token KL); aggregated with seq-mean-token-sum it read ~4x that (46.7 vs 12.4)."""
    from hfsdk import masked_mean

    mask = rollout_batch["response_mask"]
    current = rollout_batch["old_log_probs"]
    ref = (current + torch.linspace(-1.0, 1.0, mask.shape[1])) * mask
    keys = [k for k in rollout_batch.tensor_keys if k != "old_log_probs"]
    batch = rollout_batch.select(tensor_keys=keys)
    batch["ref_log_probs"] = ref
    batch["advantages"] = torch.zeros_like(mask)
    actor = _actor(model_dir)
    assert actor.is_on_policy(len(batch))  # the update's first forward is the rollout policy's
    objective = ActorObjective(policy_loss=reinforce_loss, loss_agg_mode="seq-mean-token-sum")
    metrics = actor.update_actor(batch, objective)
    r = (ref - current) * mask
    k3 = float(masked_mean(torch.exp(r) - r - 1, mask))
    assert metrics["actor/kl"] == pytest.approx(k3, rel=1e-4)
