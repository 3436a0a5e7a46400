"""The clipped value loss (and ppo_clip beside it): hand-computed values, masked garbage."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk import LossAggregation
from hfsdk.core.algorithm import LOSS_AGG_MODES
from hfsdk.core.errors import HfsdkError
from hfsdk_policy_losses.losses import ppo_clip_loss
from hfsdk_ppo.losses import ClippedValueLossConfig, clipped_value_loss


def test_clipped_value_loss_by_hand() -> None:
    values = torch.tensor([[1.0, 2.0, 1.1, 42.0]], requires_grad=True)
    old = torch.tensor([[0.5, 2.5, 1.0, 0.0]])
    returns = torch.tensor([[2.0, 1.0, 1.5, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    loss, metrics = clipped_value_loss(
        values=values, old_values=old, returns=returns, response_mask=mask
    )
    # v_clip = [0.7, 2.3, 1.1]; max(l1, l2) = [1.69, 1.69, 0.16]
    assert loss.item() == pytest.approx(0.5 * (1.69 + 1.69 + 0.16) / 3)
    assert metrics["vf_clipfrac"] == pytest.approx(2 / 3)
    loss.backward()
    # Only the unclipped token has a gradient: ½·2·(v − R)/3.
    torch.testing.assert_close(values.grad, torch.tensor([[0.0, 0.0, (1.1 - 1.5) / 3, 0.0]]))
    unclipped, m = clipped_value_loss(
        values=values,
        old_values=old,
        returns=returns,
        response_mask=mask,
        config=ClippedValueLossConfig(clip_range_value=None),
    )
    assert unclipped.item() == pytest.approx(0.5 * (1.0 + 1.0 + 0.16) / 3)
    assert m["vf_clipfrac"] == 0.0


def test_shape_mismatch() -> None:
    with pytest.raises(HfsdkError, match="returns has shape"):
        clipped_value_loss(
            values=torch.zeros(2, 3),
            old_values=torch.zeros(2, 3),
            returns=torch.zeros(3, 2),
            response_mask=torch.ones(2, 3),
        )


def test_registered() -> None:
    assert hfsdk.get_registry("policy_losses").get("ppo_clip").impl is ppo_clip_loss
    entry = hfsdk.get_registry("value_losses").get("clipped")
    assert entry.impl is clipped_value_loss and entry.config_cls is ClippedValueLossConfig


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    mode=st.sampled_from(LOSS_AGG_MODES),
    garbage=st.sampled_from([float("nan"), float("inf"), -1e30, 3.0]),
)
def test_masked_positions_never_change_losses(seed: int, mode: str, garbage: float) -> None:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(3, 4, generator=gen) > 0.5
    inputs = [torch.randn(3, 4, generator=gen) * 0.3 for _ in range(3)]
    fill = torch.full((3, 4), garbage)

    def both(dirty: bool):
        a, b, c = (torch.where(mask, x, fill) if dirty else x for x in inputs)
        a = a.clone().requires_grad_(True)
        pg, pg_m = ppo_clip_loss(
            log_prob=a,
            old_log_prob=b,
            advantages=c,
            response_mask=mask,
            aggregation=LossAggregation(mode=mode),
        )
        vf, vf_m = clipped_value_loss(
            values=a,
            old_values=b,
            returns=c,
            response_mask=mask,
            aggregation=LossAggregation(mode=mode),
        )
        (pg + vf).backward()
        return pg.detach(), vf.detach(), pg_m, vf_m, a.grad

    clean, dirty = both(False), both(True)
    for x, y in zip(clean, dirty, strict=True):
        assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
    assert torch.isfinite(clean[-1]).all()
