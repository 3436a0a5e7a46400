"""The plain ``reinforce`` loss: values, gradients, masked garbage, registry entry."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk import LOSS_AGG_MODES, HfsdkError, LossAggregation
from hfsdk_policy_losses.losses import ReinforceConfig, reinforce_loss


def test_reinforce_by_hand() -> None:
    log_prob = torch.tensor([[-1.0, -2.0], [-0.5, 7.0]], requires_grad=True)
    old = torch.tensor([[-1.5, -2.0], [-0.5, 0.0]])
    adv = torch.tensor([[2.0, 2.0], [-1.0, -1.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    loss, metrics = reinforce_loss(
        log_prob=log_prob, old_log_prob=old, advantages=adv, response_mask=mask
    )
    # -A * logp = [2, 4, -0.5] over 3 tokens
    assert loss.item() == pytest.approx(5.5 / 3)
    loss.backward()
    torch.testing.assert_close(log_prob.grad, torch.tensor([[-2 / 3, -2 / 3], [1 / 3, 0.0]]))
    assert metrics["pg_clipfrac"] == 0.0
    assert metrics["ppo_kl"] == pytest.approx((-0.5 + 0.0 + 0.0) / 3)


def test_reinforce_is_registered_with_its_config() -> None:
    entry = hfsdk.get_registry("policy_losses").get("reinforce")
    assert entry.impl is reinforce_loss
    assert entry.config_cls is ReinforceConfig


def test_shape_mismatch_is_a_clear_error() -> None:
    with pytest.raises(HfsdkError, match="advantages has shape"):
        reinforce_loss(
            log_prob=torch.zeros(2, 3),
            old_log_prob=torch.zeros(2, 3),
            advantages=torch.zeros(2),
            response_mask=torch.ones(2, 3),
        )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    mode=st.sampled_from(LOSS_AGG_MODES),
    garbage=st.sampled_from([float("nan"), float("inf"), -1e30, 5.0]),
)
def test_masked_positions_never_change_loss_or_gradients(
    seed: int, mode: str, garbage: float
) -> None:
    gen = torch.Generator().manual_seed(seed)
    shape = (3, 4)
    mask = torch.rand(shape, generator=gen) > 0.5
    inputs = [torch.randn(shape, generator=gen) for _ in range(3)]

    def run(dirty: bool) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
        fill = torch.full(shape, garbage)
        log_prob, old, adv = (torch.where(mask | ~torch.tensor(dirty), x, fill) for x in inputs)
        log_prob = log_prob.clone().requires_grad_(True)
        loss, metrics = reinforce_loss(
            log_prob=log_prob,
            old_log_prob=old,
            advantages=adv,
            response_mask=mask,
            aggregation=LossAggregation(mode=mode),
        )
        loss.backward()
        return loss.detach(), metrics, log_prob.grad

    clean, dirty = run(False), run(True)
    assert torch.equal(clean[0], dirty[0])
    assert clean[1] == dirty[1]
    assert torch.equal(clean[2], dirty[2])
