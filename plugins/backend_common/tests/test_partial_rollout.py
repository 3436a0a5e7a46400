"""Partial rollouts on a replica: a weight update between segments, tokens tagged by version."""

from __future__ import annotations

import copy

import torch

from hfsdk import Batch
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.run_assets import resolve_assets
from hfsdk_backend_common.rollout.replica import RolloutReplicaWorker, replica_log_probs

PROMPTS = ["1+2=", "3+4=", "2+2=", "5+1=", "0+3=", "4+4=", "1+1=", "2+5="]


def _replica() -> RolloutReplicaWorker:
    config = load_run_config(
        "grpo", None, ["rollout.max_response_length=6", "rollout.temperature=3.0"]
    )
    assets = resolve_assets(config, "actor")
    return RolloutReplicaWorker(role="rollout", config=config, assets=assets, section=config.actor)


def _prompts(tokenizer: object) -> Batch:
    enc = tokenizer(PROMPTS * 2, return_tensors="pt", padding=True, padding_side="left")
    return Batch.from_dict(
        tensors={"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]},
        non_tensors={"uid": list(range(len(PROMPTS) * 2))},
        meta={"n": 1, "greedy": False},
    )


def test_tokens_carry_the_version_and_log_probs_of_the_weights_that_sampled_them() -> None:
    replica = _replica()
    module = replica.source.module
    first = copy.deepcopy(module)
    replica.source.weights_version = 1  # after the first sync: policy version 0
    partial = replica.start_partial(_prompts(replica.source.tokenizer), 2, False, 1)
    with torch.no_grad():  # the actor's update arrives between two segments
        generator = torch.Generator().manual_seed(0)
        for param in module.parameters():
            param.add_(0.2 * torch.randn(param.shape, generator=generator))
    replica.source.weights_version = 2
    partial = replica.continue_partial(partial, 2, False, 2)
    replica.source.weights_version = 3  # a sync with the same weights: only the tag moves
    out = replica.continue_partial(partial, 2, True, 3)

    mask = out["response_mask"].bool()
    versions = out["token_versions"]
    for segment, version in enumerate((0.0, 1.0, 2.0)):
        cols = slice(2 * segment, 2 * segment + 2)
        assert mask[:, cols].any(), f"no row reached segment {segment}"
        assert (versions[:, cols][mask[:, cols]] == version).all()
    # each token's behaviour log-prob is the one of the weights that sampled it
    before, after = replica_log_probs(first, out), replica_log_probs(module, out)
    logged = out["rollout_log_probs"]
    early, late = mask.clone(), mask.clone()
    early[:, 2:] = False
    late[:, :2] = False
    torch.testing.assert_close(logged[early], before[early], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logged[late], after[late], atol=1e-4, rtol=1e-4)
    assert (logged[late] - before[late]).abs().max() > 1e-2  # the update did change them
    # the output is a rollout batch: prompts + responses, mask up to the first EOS
    assert torch.equal(out["input_ids"][:, -6:], out["responses"])
    assert out.meta["weights_version"] == 3


def test_a_fresh_replica_tags_tokens_with_the_trainers_version() -> None:
    """After a resume or a replica restart the replica's own sync count restarts at 1; the
    tokens still carry the trainer's policy version the pipeline passes (staleness stays
    true, not 5-6 steps where it is at most 2)."""
    replica = _replica()
    replica.source.weights_version = 4  # the old replica: synced with versions 0..3
    partial = replica.start_partial(_prompts(replica.source.tokenizer), 2, False, 1, 3)
    # Resumed: a fresh replica, synced once with the checkpoint's weights (version 5).
    fresh = _replica()
    fresh.source.weights_version = 1
    out = fresh.continue_partial(partial, 2, True, 2, 5)
    mask = out["response_mask"].bool()
    versions = out["token_versions"]
    assert (versions[:, :2][mask[:, :2]] == 3.0).all()
    assert mask[:, 2:4].any() and (versions[:, 2:4][mask[:, 2:4]] == 5.0).all()
    assert out.meta["policy_version"] == 5
