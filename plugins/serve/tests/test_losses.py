"""The built-in losses' numbers and gradients on hand-made inputs (no model)."""

from __future__ import annotations

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_serve.losses import loss_fn


def _inputs(sampler: list[float], adv: list[float]) -> dict[str, torch.Tensor]:
    return {"logprobs": torch.tensor(sampler), "advantages": torch.tensor(adv)}


def test_cross_entropy_is_weighted_negative_log_likelihood() -> None:
    logp = torch.tensor([-1.0, -2.0, -3.0])
    assert loss_fn("cross_entropy")(logp, {"weights": torch.tensor([0.0, 1.0, 0.5])}, {}) == 3.5
    assert loss_fn("cross_entropy")(logp, {}, {}) == 6.0


def test_importance_sampling_gradient_is_ratio_times_advantage() -> None:
    logp = torch.tensor([-1.0, -2.0], requires_grad=True)
    inputs = _inputs([-1.5, -2.0], [2.0, -1.0])
    loss = loss_fn("importance_sampling")(logp, inputs, {})
    loss.backward()
    ratio = torch.exp(torch.tensor([0.5, 0.0]))
    assert torch.allclose(loss, -(ratio * torch.tensor([2.0, -1.0])).sum())
    assert torch.allclose(logp.grad, -ratio * torch.tensor([2.0, -1.0]))


def test_ppo_clips_the_ratio_where_the_objective_would_grow() -> None:
    # ratio e^0.5 = 1.65 with A > 0: clipped at 1.2 (no gradient); ratio e^-0.5 = 0.61 with
    # A > 0: not clipped (min picks the unclipped term).
    logp = torch.tensor([0.0, 0.0], requires_grad=True)
    inputs = _inputs([-0.5, 0.5], [1.0, 1.0])
    loss = loss_fn("ppo")(logp, inputs, {})
    loss.backward()
    low = torch.exp(torch.tensor(-0.5))
    assert torch.allclose(loss, -(1.2 + low))
    assert torch.allclose(logp.grad, torch.tensor([0.0, -float(low)]))
    # loss_fn_config bounds apply; a datum's per-token bounds win over them.
    wide = loss_fn("ppo")(logp.detach(), inputs, {"clip_high_threshold": 2.0})
    assert torch.allclose(wide, -(torch.exp(torch.tensor(0.5)) + low))
    per_token = {
        **inputs,
        "clip_low_threshold": torch.full((2,), 0.9),
        "clip_high_threshold": torch.full((2,), 1.1),
    }
    assert torch.allclose(loss_fn("ppo")(logp.detach(), per_token, {}), -(1.1 + low))


def test_cispo_weights_logp_by_the_clipped_ratio_without_its_gradient() -> None:
    logp = torch.tensor([-1.0], requires_grad=True)
    loss = loss_fn("cispo")(logp, _inputs([-2.0], [3.0]), {})  # ratio e = 2.72 -> 1.2
    loss.backward()
    assert torch.allclose(loss, torch.tensor(1.2 * 3.0))
    assert torch.allclose(logp.grad, torch.tensor([-1.2 * 3.0]))


def test_unknown_and_unserved_names() -> None:
    with pytest.raises(HfsdkError, match="'dro' is not implemented by hfsdk serve"):
        loss_fn("dro")
    with pytest.raises(HfsdkError, match="'xent' is unknown; use one of"):
        loss_fn("xent")
