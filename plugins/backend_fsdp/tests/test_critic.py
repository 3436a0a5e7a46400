"""The critic engine: per-token values and the value update."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.objectives import CriticObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.critic import CriticEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_ppo.losses import clipped_value_loss


@pytest.fixture(scope="module")
def sequences(model_dir: Path, make_prompts: Callable[..., Batch]) -> Batch:
    """8 responses (2 greedy ones each, deterministic) to 4 prompts."""
    actor = ActorEngine(FSDPRoleConfig(model_path=str(model_dir)), role="actor")
    rollout = HFRollout(HFRolloutConfig(max_response_length=5, n=2, temperature=0.0), actor)
    return rollout.generate_sequences(
        make_prompts(["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="])
    )


def _critic(model_dir: Path, lr: float = 3e-3) -> CriticEngine:
    config = FSDPRoleConfig(
        model_path=str(model_dir), mini_batch_size=8, micro_batch_size=4, optim=OptimConfig(lr=lr)
    )
    return CriticEngine(config, role="critic")


def test_values_are_the_head_output_before_each_response_token(
    model_dir: Path, sequences: Batch
) -> None:
    critic = _critic(model_dir)
    values = critic.compute_values(sequences)["values"]
    assert values.shape == sequences["responses"].shape
    mask = sequences["response_mask"]
    assert values[mask == 0].eq(0).all()
    with torch.no_grad():
        per_token = critic.module(
            input_ids=sequences["input_ids"],
            attention_mask=sequences["attention_mask"],
            position_ids=sequences["position_ids"],
        ).logits[..., 0]
    width = sequences["prompts"].shape[1]
    # values[:, t] is the value at the token just before response token t.
    torch.testing.assert_close(values, per_token[:, width - 1 : -1] * mask)


def test_update_fits_the_returns(model_dir: Path, sequences: Batch) -> None:
    critic = _critic(model_dir, lr=1e-2)
    batch = sequences.union(critic.compute_values(sequences))
    mask = batch["response_mask"]
    # One target per prompt: its two samples share the prompt's state.
    targets = torch.tensor([1.0, -1.0, 0.5, -0.5]).repeat_interleave(2)[:, None]
    batch["returns"] = targets.expand_as(mask) * mask
    objective = CriticObjective(value_loss=clipped_value_loss)
    losses = []
    for _ in range(20):
        batch["values"] = critic.compute_values(batch)["values"]
        metrics = critic.update_critic(batch, objective)
        losses.append(metrics["critic/vf_loss"])
    assert {"critic/vf_loss", "critic/vf_clipfrac", "critic/grad_norm", "critic/lr"} <= set(metrics)
    assert losses[-1] < 0.1 * losses[0]


def test_missing_returns_is_a_clear_error(model_dir: Path, sequences: Batch) -> None:
    critic = _critic(model_dir)
    batch = sequences.union(critic.compute_values(sequences))
    with pytest.raises(HfsdkError, match=r"needs batch keys \['returns'\]"):
        critic.update_critic(batch, CriticObjective(value_loss=clipped_value_loss))
