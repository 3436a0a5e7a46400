"""A role worker seeds its process before building its engine: a value head the checkpoint
lacks starts the same in every run, in a process of its own as under fused colocation."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import torch

from hfsdk import load_run_config
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.fsdp_worker import FSDPPolicyWorker, FSDPValueWorker


def _value_head(model_dir: Path, seed: int, config: Any = None) -> dict[str, torch.Tensor]:
    if config is None:
        config = types.SimpleNamespace(trainer=types.SimpleNamespace(seed=seed, total_steps=1))
    assets = types.SimpleNamespace(model_path=str(model_dir), tokenizer_path=str(model_dir))
    worker = FSDPValueWorker(
        role="critic", config=config, assets=assets, section=FSDPRoleConfig(model_path=None)
    )
    state = worker.engine.module.state_dict()
    head = {k: v.detach().clone() for k, v in state.items() if k.startswith("score.")}
    assert head, sorted(state)
    return head


def test_the_critics_value_head_is_the_same_whatever_the_process_drew_before(
    model_dir: Path,
) -> None:
    # Before: the head came from the process's generator as it happened to be (a fresh Ray
    # worker: unseeded), so two identical runs started from different value heads.
    torch.manual_seed(123)
    first = _value_head(model_dir, seed=7)
    torch.manual_seed(456)
    torch.rand(1000)
    second = _value_head(model_dir, seed=7)
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name
    other = _value_head(model_dir, seed=8)
    assert any(not torch.equal(first[n], other[n]) for n in first)  # seeded by the run's seed


def test_what_the_worker_samples_with_after_its_build_is_the_seed_as_before(
    model_dir: Path,
) -> None:
    _value_head(model_dir, seed=7)
    after = torch.rand(4)
    torch.manual_seed(7)
    assert torch.equal(after, torch.rand(4))


def test_the_value_head_is_the_one_a_fused_process_gives_it_after_the_actor(
    model_dir: Path,
) -> None:
    """Fused colocation builds the actor first, which seeds the process, then the critic: a
    critic in a process of its own gets that same head."""
    config = load_run_config("ppo", None, ["trainer.seed=3"])
    assets = types.SimpleNamespace(model_path=str(model_dir), tokenizer_path=str(model_dir))
    torch.manual_seed(11)
    FSDPPolicyWorker(role="actor", config=config, assets=assets, section=FSDPRoleConfig())
    fused = _value_head(model_dir, 3, config)
    torch.manual_seed(12)  # a process of its own: whatever state it starts in
    alone = _value_head(model_dir, 3, config)
    for name in fused:
        assert torch.equal(fused[name], alone[name]), name
