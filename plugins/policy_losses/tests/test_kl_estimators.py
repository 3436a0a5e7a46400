"""The KL estimators this plugin registers: values by hand, names, the clamped k3."""

from __future__ import annotations

import math

import pytest
import torch

import hfsdk
from hfsdk import token_kl

# d = log_prob - ref_log_prob = [0.5, -1.0]
LOG_PROB = torch.tensor([[-1.0, -2.0]])
REF = torch.tensor([[-1.5, -1.0]])
MASK = torch.ones(1, 2)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("k1", [0.5, -1.0]),
        ("abs", [0.5, 1.0]),
        ("k2", [0.125, 0.5]),
        ("k3", [math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1]),
        ("k3_clamped", [math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1]),
        ("low_var_kl", [math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1]),
    ],
)
def test_estimators_by_hand(name: str, expected: list[float]) -> None:
    out = token_kl(LOG_PROB, REF, MASK, name)
    torch.testing.assert_close(out, torch.tensor([expected]))


def test_estimators_are_registered_by_name() -> None:
    registry = hfsdk.get_registry("kl_estimators")
    assert {"k1", "abs", "k2", "k3", "k3_clamped", "low_var_kl"} <= set(registry)
    assert registry.get("k2").impl(LOG_PROB, REF).tolist() == [[0.125, 0.5]]


def test_clamped_k3_stays_bounded_where_k3_explodes() -> None:
    log_prob, ref = torch.tensor([[-40.0, 0.0]]), torch.tensor([[-10.0, -40.0]])
    clamped = token_kl(log_prob, ref, torch.ones(1, 2), "k3_clamped")
    # ref - logp = 30 -> clamped to 20 -> exp(20) - 21 -> clamped to 10; -40 -> -20 -> e^-20 + 19.
    torch.testing.assert_close(clamped, torch.tensor([[10.0, 10.0]]))
    assert token_kl(log_prob, ref, torch.ones(1, 2), "k3")[0, 0].item() > 1e12
