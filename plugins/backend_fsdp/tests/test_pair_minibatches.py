"""A ``mini_batch_size`` that would split a row group (a preference pair) is refused.

Pairs stay whole in a mini-batch, so a rank's share of an odd ``mini_batch_size`` (or of
one below a pair per rank) would be rounded up: fewer optimizer steps than configured,
and a different count on a different number of ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import hfsdk
from hfsdk import Batch, HfsdkError
from hfsdk_backend_common.engine_support import check_minibatch_groups
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_policy_losses.losses import ppo_clip_loss
from hfsdk_supervised_data import collate_preference_pairs, tokenize_preference_pairs


def _pair_batch(tokenizer) -> Batch:  # type: ignore[no-untyped-def]
    """Three interleaved pairs (6 rows, ``ROW_GROUP`` 2) ready for ``update_actor``."""
    rows = [{"prompt": f"{a} + {a} =", "chosen": str(2 * a), "rejected": str(a)} for a in (1, 2, 3)]
    pairs = tokenize_preference_pairs(rows, tokenizer, use_template=False)
    batch = collate_preference_pairs(pairs, tokenizer.pad_token_id)
    mask = batch["response_mask"].float()
    batch["old_log_probs"] = -mask
    batch["advantages"] = torch.where(batch["chosen"].bool(), 1.0, -1.0)[:, None] * mask
    batch.meta[hfsdk.ROW_GROUP] = 2
    return batch


def _optimizer_steps(actor: ActorEngine) -> int:
    assert actor.optimizer is not None
    return int(next(iter(actor.optimizer.state.values()))["step"])


def test_an_odd_mini_batch_size_of_pairs_is_refused_and_an_even_one_trains(
    model_dir: Path,
) -> None:
    def actor(mini: int) -> ActorEngine:
        config = FSDPRoleConfig(
            model_path=str(model_dir), mini_batch_size=mini, micro_batch_size=2, shuffle=False,
            optim=OptimConfig(lr=1e-3),
        )  # fmt: skip
        return ActorEngine(config, role="actor")

    odd = actor(3)
    batch = _pair_batch(odd.tokenizer)
    objective = ActorObjective(policy_loss=ppo_clip_loss)
    with pytest.raises(HfsdkError, match=r"actor\.mini_batch_size=3 .*multiple of 2 x 1 = 2"):
        odd.update_actor(batch, objective)
    even = actor(4)
    even.update_actor(batch, objective)
    assert _optimizer_steps(even) == 2  # 3 pairs in mini-batches of 2 pairs: 2 steps


def test_one_row_per_rank_of_pairs_is_refused_and_single_rows_are_not() -> None:
    # 2 rows on 2 ranks: one row each, which cannot hold a pair (it was rounded to 2 a rank).
    with pytest.raises(HfsdkError, match=r"reward_model\.mini_batch_size=2 .*set reward_model"):
        check_minibatch_groups("reward_model", 2, 2, 2)
    check_minibatch_groups("reward_model", 4, 2, 2)
    check_minibatch_groups("reward_model", 2, 2, 1)  # rows without groups: any multiple of ranks
