"""Warmup + constant/cosine learning-rate schedule, and the AdamW it drives."""

from __future__ import annotations

import math

import pytest
import torch

from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.lr_schedule import apply_optim_config, build_optimizer, build_scheduler
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


def test_the_cosine_follows_transformers_convention() -> None:
    """As transformers' cosine schedule: the peak serves the last warmup update and the
    first cosine one, and lr·min_lr_ratio is reached one step after the last of
    total_steps updates, so the 6th of 6 updates trains at about 0.2318, not 0.1."""
    from transformers import get_cosine_with_min_lr_schedule_with_warmup

    config = OptimConfig(lr=1.0, warmup_steps=2, lr_schedule="cosine", min_lr_ratio=0.1)
    lrs = _lrs(config, 6, total=6)
    assert lrs == pytest.approx([0.5, 1.0, 1.0, 0.8682, 0.55, 0.2318], abs=1e-4)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    theirs = get_cosine_with_min_lr_schedule_with_warmup(optimizer, 2, 6, min_lr_rate=0.1)
    # transformers' warmup starts at 0 (ours at 1/warmup_steps); the cosine is the same.
    assert [theirs.lr_lambdas[0](step) for step in range(2, 7)] == pytest.approx([*lrs[2:], 0.1])


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


def test_a_run_extended_on_resume_follows_the_longer_cosine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The cosine's length comes from trainer.total_steps: a 2-step run resumed to 4 steps
    restored the 2-step cosine and trained steps 3-4 at lr 0. It now follows the 4-step
    cosine from there (the lr an uninterrupted 4-step run has), and says the shape changed."""
    config = OptimConfig(lr=1.0, warmup_steps=1, lr_schedule="cosine")
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    short = build_scheduler(optimizer, config, 2)
    for _ in range(2):
        optimizer.step()
        short.step()
    resumed_optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    resumed_optimizer.load_state_dict(optimizer.state_dict())  # its lr: the short cosine's 0
    resumed = build_scheduler(resumed_optimizer, config, 4)
    with caplog.at_level("WARNING"):
        resumed.load_state_dict(short.state_dict())
    assert "resumes with this run's" in caplog.text
    straight = _lrs(config, 4, total=4)
    assert straight[2] > 0.1
    assert resumed_optimizer.param_groups[0]["lr"] == pytest.approx(straight[2])
    resumed_optimizer.step()
    resumed.step()
    assert resumed_optimizer.param_groups[0]["lr"] == pytest.approx(straight[3])
    caplog.clear()  # a constant schedule's length changes nothing: nothing to say
    constant = build_scheduler(resumed_optimizer, OptimConfig(lr=1.0), 4)
    with caplog.at_level("WARNING"):
        constant.load_state_dict(build_scheduler(optimizer, OptimConfig(lr=1.0), 2).state_dict())
    assert "resumes with" not in caplog.text


def test_cpu_parameters_step_with_the_fused_kernel_and_the_role_settings() -> None:
    optim = OptimConfig(lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
    torch.manual_seed(0)
    start = [torch.randn(7, 5), torch.randn(5)]
    fused_params = [torch.nn.Parameter(t.clone()) for t in start]
    loop_params = [torch.nn.Parameter(t.clone()) for t in start]
    fused, _ = build_optimizer(iter(fused_params), optim, total_steps=10)  # a generator too
    loop = torch.optim.AdamW(loop_params, lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
    assert fused.defaults["fused"] is True and loop.defaults["fused"] is None
    for step in range(3):
        for params in (fused_params, loop_params):
            for p in params:
                p.grad = torch.sin(p.detach() * (step + 1))
        fused.step()
        loop.step()
    for a, b in zip(fused_params, loop_params, strict=True):
        # Same arithmetic in another order: a few float32 ulps of values of order 1.
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
        assert not torch.equal(a, torch.zeros_like(a))


def test_parameters_on_a_device_without_the_fused_kernel_step_one_at_a_time() -> None:
    optimizer, _ = build_optimizer([torch.nn.Parameter(torch.zeros(3, device="meta"))],
                                   OptimConfig(), total_steps=1)  # fmt: skip
    assert optimizer.defaults["fused"] is None


class _NormedLinear(torch.nn.Module):
    """A matrix, its bias and a norm gain: the parameters a decay policy tells apart."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.norm = torch.nn.RMSNorm(4)


def _one_step_without_gradient(optim: OptimConfig) -> tuple[_NormedLinear, dict[str, torch.Tensor]]:
    """The module and its parameters before one optimizer step on zero gradients."""
    module = _NormedLinear()
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    optimizer, _ = build_optimizer(module.parameters(), optim, total_steps=1)
    for p in module.parameters():
        p.grad = torch.zeros_like(p)  # zero advantages: only weight decay moves anything
    optimizer.step()
    return module, before


def test_norms_and_biases_keep_their_values_when_excluded_from_decay() -> None:
    """TRL and OpenRLHF never decay norm gains and biases; every weight decayed before."""
    optim = OptimConfig(lr=0.1, weight_decay=0.5, decay_norms_and_biases=False)
    module, before = _one_step_without_gradient(optim)
    assert torch.equal(module.norm.weight, before["norm.weight"])
    assert torch.equal(module.linear.bias, before["linear.bias"])
    torch.testing.assert_close(module.linear.weight, before["linear.weight"] * (1 - 0.1 * 0.5))
    default, before = _one_step_without_gradient(OptimConfig(lr=0.1, weight_decay=0.5))
    torch.testing.assert_close(default.norm.weight, before["norm.weight"] * (1 - 0.1 * 0.5))


def test_a_loaded_state_keeps_the_configs_lr_betas_eps_and_weight_decay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A state saved under other settings restored its lr, betas, eps and weight decay."""
    saved_config = OptimConfig(lr=1e-3, decay_norms_and_biases=False, weight_decay=0.1)
    module = _NormedLinear()
    saved_optimizer, saved_scheduler = build_optimizer(module.parameters(), saved_config, 4)
    config = OptimConfig(
        lr=1e-4, betas=(0.5, 0.9), eps=1e-6, weight_decay=0.5, decay_norms_and_biases=False
    )
    optimizer, scheduler = build_optimizer(_NormedLinear().parameters(), config, 4)
    optimizer.load_state_dict(saved_optimizer.state_dict())
    with caplog.at_level("WARNING"):
        apply_optim_config(optimizer, config)
    scheduler.load_state_dict(saved_scheduler.state_dict())
    assert "betas (0.9, 0.999) -> (0.5, 0.9)" in caplog.text
    assert "lr 0.001 -> 0.0001" in caplog.text
    assert scheduler.base_lrs == [1e-4, 1e-4] and scheduler.get_last_lr() == [1e-4, 1e-4]
    settings = [(g["lr"], g["betas"], g["eps"], g["weight_decay"]) for g in optimizer.param_groups]
    assert settings == [(1e-4, (0.5, 0.9), 1e-6, 0.5), (1e-4, (0.5, 0.9), 1e-6, 0.0)]
