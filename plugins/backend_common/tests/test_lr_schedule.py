"""Warmup + constant/cosine learning-rate schedule."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.lr_schedule import build_scheduler
from hfsdk_backend_common.optim_config import OptimConfig


def _lrs(config: OptimConfig, steps: int, total: int | None = None) -> list[float]:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=config.lr)
    scheduler = build_scheduler(optimizer, config, total)
    lrs = []
    for _ in range(steps):
        lrs.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    return lrs


def test_warmup_then_constant() -> None:
    lrs = _lrs(OptimConfig(lr=1.0, warmup_steps=4), 6)
    assert lrs == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])


def test_warmup_then_cosine_to_the_floor() -> None:
    config = OptimConfig(lr=1.0, warmup_steps=2, lr_schedule="cosine", min_lr_ratio=0.1)
    lrs = _lrs(config, 8, total=6)
    assert lrs[:2] == pytest.approx([0.5, 1.0])
    # Cosine over the 4 steps after warmup, from 1.0 down to 0.1, then flat.
    expected = [0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * k / 4)) for k in range(5)]
    assert lrs[2:7] == pytest.approx(expected)
    assert lrs[7] == pytest.approx(0.1)


def test_cosine_needs_total_steps() -> None:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])
    with pytest.raises(HfsdkError, match="total_steps"):
        build_scheduler(optimizer, OptimConfig(lr_schedule="cosine"))
    # The config's own total_steps wins over the trainer's.
    scheduler = build_scheduler(optimizer, OptimConfig(lr_schedule="cosine", total_steps=10), 3)
    assert scheduler.lr_lambdas[0].total_steps == 10


def test_state_round_trip_resumes_the_schedule() -> None:
    config = OptimConfig(lr=1.0, warmup_steps=2, lr_schedule="cosine", total_steps=10)
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = build_scheduler(optimizer, config)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    fresh_optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    fresh = build_scheduler(fresh_optimizer, config)
    fresh.load_state_dict(state)
    assert fresh.get_last_lr() == scheduler.get_last_lr()
    optimizer.step()
    scheduler.step()
    fresh_optimizer.step()
    fresh.step()
    assert fresh.get_last_lr() == pytest.approx(scheduler.get_last_lr())
