"""The on-policy skip of the old log-probs: only where provably equal, and never blind.

With dropout the training forward is a noisy draw, so skipping the old
log-probs (ratio 1) would train on a different gradient than the full path;
without old log-probs the controller cannot compare the rollout engine's
log-probs, so the update does (``rollout/log_prob_diff_*``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_common.sync_check import DIFF_MAX, DIFF_MEAN, model_has_dropout
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_policy_losses.losses import ppo_clip_loss

PROMPTS = ["3 + 5 =", "1 + 2 + 3 + 4 =", "9 + 9 =", "4 + 0 ="]
OBJECTIVE = ActorObjective(policy_loss=ppo_clip_loss)


def _actor(model_dir: Path, **overrides: object) -> ActorEngine:
    settings: dict[str, object] = {
        "model_path": str(model_dir),
        "mini_batch_size": 8,
        "micro_batch_size": 4,
        "optim": OptimConfig(lr=1e-3),
        **overrides,
    }
    return ActorEngine(FSDPRoleConfig(**settings), role="actor")  # type: ignore[arg-type]


@pytest.fixture
def sampled(model_dir: Path, make_prompts: Callable[..., Batch]) -> Batch:
    """8 responses to prompts of different lengths, with advantages."""
    torch.manual_seed(0)
    rollout = HFRollout.build(
        HFRolloutConfig(max_response_length=10, n=2, temperature=0.7), _actor(model_dir)
    )
    batch = rollout.generate_sequences(make_prompts(PROMPTS))
    batch["advantages"] = torch.randn(len(batch), 1) * batch["response_mask"]
    return batch


@pytest.fixture
def dropout_dir(model_dir: Path, tmp_path: Path) -> Path:
    """The tiny model with attention dropout 0.5 (HF passes it to attention in training mode)."""
    target = tmp_path / "dropout"
    shutil.copytree(model_dir, target)
    config = json.loads((target / "config.json").read_text())
    config["attention_dropout"] = 0.5
    (target / "config.json").write_text(json.dumps(config))
    return target


def test_dropout_is_found_in_layers_attributes_and_configs(
    model_dir: Path, dropout_dir: Path
) -> None:
    assert not model_has_dropout(_actor(model_dir).module)
    assert model_has_dropout(_actor(dropout_dir).module)
    assert model_has_dropout(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1)))
    assert not model_has_dropout(torch.nn.Sequential(torch.nn.Dropout(0.0)))


def test_with_dropout_the_skip_path_is_the_full_path(dropout_dir: Path, sampled: Batch) -> None:
    given, derived = _actor(dropout_dir), _actor(dropout_dir)
    assert not derived.is_on_policy(len(sampled))  # one epoch, one mini-batch, but dropout
    with_old = sampled.union(given.compute_log_prob(sampled))  # eval mode: the sampler's
    torch.manual_seed(11)  # the same dropout masks in both training forwards
    metrics_given = given.update_actor(with_old, OBJECTIVE)
    torch.manual_seed(11)
    metrics_derived = derived.update_actor(sampled, OBJECTIVE)
    # Ratio 1 (the old skip) would give ppo_kl 0 and another gradient.
    assert metrics_derived["actor/ppo_kl"] == pytest.approx(metrics_given["actor/ppo_kl"])
    assert metrics_given["actor/ppo_kl"] != 0.0
    for (name, a), b in zip(
        given.module.named_parameters(), derived.module.parameters(), strict=True
    ):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5, msg=name)


@pytest.mark.parametrize("mini_batch_size", [8, 4], ids=["skipped", "computed-by-update"])
def test_update_without_old_log_probs_still_checks_the_rollout_log_probs(
    model_dir: Path, sampled: Batch, mini_batch_size: int
) -> None:
    reference = _actor(model_dir).compute_log_prob(sampled)["old_log_probs"]
    mask = sampled["response_mask"]
    for offset in (0.0, 0.25):  # synced weights, then a rollout engine off by 0.25 nats
        actor = _actor(model_dir, mini_batch_size=mini_batch_size)
        batch = sampled.union(
            Batch.from_dict(tensors={"rollout_log_probs": (reference + offset) * mask})
        )
        metrics = actor.update_actor(batch, OBJECTIVE)
        # The training forward (or the update's own old log-probs) before the first step.
        assert metrics[DIFF_MEAN] == pytest.approx(offset, abs=1e-5)
        assert metrics[DIFF_MAX] == pytest.approx(offset, abs=1e-5)
    # With the controller's old log-probs given, the controller checks (finish()).
    given = sampled.union(Batch.from_dict(tensors={"old_log_probs": reference}))
    given = given.union(Batch.from_dict(tensors={"rollout_log_probs": reference}))
    assert DIFF_MAX not in _actor(model_dir).update_actor(given, OBJECTIVE)
