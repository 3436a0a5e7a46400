"""The cost signal carries the KL penalty with the opposite sign of the reward's."""

from __future__ import annotations

import pytest
import torch

from hfsdk.core.maths.kl import apply_kl_penalty
from hfsdk_safe_rlhf.cost import apply_kl_to_costs


def test_cost_gets_plus_kl_and_reward_minus_kl() -> None:
    log_prob = torch.tensor([[-1.0, -1.0, 5.0]])
    ref = torch.tensor([[-1.5, -0.5, 0.0]])  # k1 = [0.5, -0.5, masked]
    mask = torch.tensor([[1, 1, 0]])
    scores = torch.tensor([[0.0, 2.0, 0.0]])
    costs, metrics = apply_kl_to_costs(scores, log_prob, ref, mask, 0.2, "k1")
    rewards, _ = apply_kl_penalty(scores, log_prob, ref, mask, 0.2, "k1")
    torch.testing.assert_close(costs, torch.tensor([[0.1, 1.9, 0.0]]))
    torch.testing.assert_close(rewards, torch.tensor([[-0.1, 2.1, 0.0]]))
    assert metrics == {"cost_kl": pytest.approx(0.0), "kl_coef": pytest.approx(0.2)}
