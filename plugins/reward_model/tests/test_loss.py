"""The Bradley-Terry loss against hand computations (value and gradient)."""

from __future__ import annotations

import math

import pytest
import torch

import hfsdk
from hfsdk import Batch
from hfsdk_reward_model.loss import BradleyTerryLoss, pair_metrics


def _micro(pairs: int) -> Batch:
    return Batch.from_dict(tensors={"chosen": torch.tensor([1, 0] * pairs)})


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_value_and_gradient_equal_the_hand_computation() -> None:
    values = [1.5, -0.5, 0.2, 0.9]  # pairs (1.5 vs -0.5) and (0.2 vs 0.9)
    scores = torch.tensor(values, requires_grad=True)
    loss_fn = BradleyTerryLoss(margin=0.25, center_coef=0.1)
    losses, stats = loss_fn(scores, _micro(2))
    losses.sum().backward()
    expected, grads = [], []
    for c, r in ((values[0], values[1]), (values[2], values[3])):
        d = c - r - 0.25
        expected.append(-math.log(_sigmoid(d)) + 0.1 * (c + r) ** 2)
        # d/dc = −σ(−d) + 2κ(c + r); d/dr = σ(−d) + 2κ(c + r)
        grads += [-_sigmoid(-d) + 0.2 * (c + r), _sigmoid(-d) + 0.2 * (c + r)]
    assert losses.tolist() == pytest.approx(expected, rel=1e-6)
    assert scores.grad.tolist() == pytest.approx(grads, rel=1e-5)
    assert stats["accuracy"].tolist() == [1.0, 0.0]
    assert stats["margin"].tolist() == pytest.approx([2.0, -0.7])


def test_a_cost_model_prefers_the_rejected_response() -> None:
    scores = torch.tensor([0.0, 2.0])
    losses, stats = BradleyTerryLoss(higher="rejected")(scores, _micro(1))
    assert losses.tolist() == pytest.approx([-math.log(_sigmoid(2.0))])
    assert stats["accuracy"].tolist() == [1.0]


def test_a_cost_models_metrics_name_the_datas_chosen_and_rejected_rows() -> None:
    # They were taken after the swap: chosen_score was the rejected row's, margin reversed.
    scores = torch.tensor([0.1, 0.9])  # the chosen (safe) row, the rejected (unsafe) row
    _, stats = BradleyTerryLoss(higher="rejected")(scores, _micro(1))
    assert stats["chosen_score"].tolist() == pytest.approx([0.1])
    assert stats["rejected_score"].tolist() == pytest.approx([0.9])
    assert stats["margin"].tolist() == pytest.approx([-0.8])  # r_chosen − r_rejected
    assert stats["accuracy"].tolist() == [1.0]  # the rejected row costs more: ranked right
    found = pair_metrics(scores, "rejected")
    assert found["chosen_score_mean"] == pytest.approx(0.1)
    assert found["rejected_score_mean"] == pytest.approx(0.9)
    assert found["margin_mean"] == pytest.approx(-0.8)
    assert found["pairwise_accuracy"] == 1.0


def test_rows_that_are_not_interleaved_pairs_are_refused() -> None:
    micro = Batch.from_dict(tensors={"chosen": torch.tensor([1, 1, 0, 0])})
    with pytest.raises(hfsdk.HfsdkError, match="interleaved preference pairs"):
        BradleyTerryLoss()(torch.zeros(4), micro)


def test_pair_metrics() -> None:
    found = pair_metrics(torch.tensor([1.0, 0.0, 0.0, 0.5, 3.0, 1.0]))
    assert found["pairwise_accuracy"] == pytest.approx(2 / 3)
    assert found["margin_mean"] == pytest.approx((1.0 - 0.5 + 2.0) / 3)
    assert pair_metrics(torch.tensor([1.0, 0.0]), "rejected")["pairwise_accuracy"] == 0.0
