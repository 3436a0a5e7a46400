"""``score_model`` roles: a reward/cost model trained with the algorithm's pairwise loss."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional

import hfsdk
from hfsdk import Batch
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.engine_factory import create_engine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_supervised_data import collate_preference_pairs, tokenize_preference_pairs


def _pair_loss(scores: torch.Tensor, micro: Batch) -> tuple[torch.Tensor, dict]:
    diff = scores[0::2] - scores[1::2]
    return -functional.logsigmoid(diff), {"accuracy": (diff > 0).float()}


def _pairs(tokenizer) -> Batch:
    rows = [
        {"prompt": f"{a} + {b} =", "chosen": str(a + b), "rejected": str((a + b + 3) % 19)}
        for a, b in [(1, 2), (3, 4), (5, 1), (2, 2), (0, 7), (6, 3)]
    ]
    pairs = tokenize_preference_pairs(rows, tokenizer, use_template=False)
    batch = collate_preference_pairs(pairs, tokenizer.pad_token_id)
    batch.meta[hfsdk.ROW_GROUP] = 2
    return batch


def _engine(model_dir: Path, micro: int):
    # Adam with a large eps steps by about lr·gradient, so the steps compare the gradients.
    config = FSDPRoleConfig(
        model_path=str(model_dir),
        micro_batch_size=micro,
        mini_batch_size=12,
        shuffle=False,
        optim=OptimConfig(lr=0.1, eps=1.0),
    )
    torch.manual_seed(0)  # the head is new (a causal-LM directory): the same draw each time
    return create_engine("reward_model", config, kind="score_model", total_steps=1)


def test_reported_loss_is_the_hand_computed_bradley_terry_mean(model_dir: Path) -> None:
    engine = _engine(model_dir, micro=4)
    batch = _pairs(engine.tokenizer)
    before = engine.compute_scores(batch)["rm_scores"]
    hand = float(-functional.logsigmoid(before[0::2] - before[1::2]).mean())
    metrics = engine.update_score_model(batch, _pair_loss)
    assert metrics["score_model/loss"] == pytest.approx(hand, rel=1e-4)
    accuracy = float((before[0::2] > before[1::2]).float().mean())
    assert metrics["score_model/accuracy"] == pytest.approx(accuracy)
    after = engine.compute_scores(batch)["rm_scores"]
    assert not torch.equal(before, after)  # the optimizer stepped


def test_micro_batches_sum_to_the_full_batch_gradient(model_dir: Path) -> None:
    whole, split = _engine(model_dir, micro=12), _engine(model_dir, micro=2)
    start = {n: p.detach().clone() for n, p in whole.module.named_parameters()}
    batch = _pairs(whole.tokenizer)
    one = whole.update_score_model(batch, _pair_loss)
    six = split.update_score_model(batch, _pair_loss)
    assert one["score_model/grad_norm"] > 0
    assert six["score_model/grad_norm"] == pytest.approx(one["score_model/grad_norm"], rel=1e-4)
    assert six["score_model/loss"] == pytest.approx(one["score_model/loss"], rel=1e-5)
    for (name, a), (_, b) in zip(
        whole.module.named_parameters(), split.module.named_parameters(), strict=True
    ):
        step_a, step_b = a.detach() - start[name], b.detach() - start[name]
        torch.testing.assert_close(step_a, step_b, atol=1e-7, rtol=1e-3, msg=name)


@pytest.mark.distributed
def test_two_ranks_train_a_score_model_like_one_process(model_dir: Path, tmp_path: Path) -> None:
    """Three pairs a rank on two FSDP ranks take the step one process takes with all six.

    The scores are read from the head by a forward hook; on two ranks the backward
    crashed (the root module's weights were resharded and nothing gathered them again).
    """
    sys.path.insert(0, str(Path(__file__).parent))
    from gloo_ranks import run_ranks

    whole = _engine(model_dir, micro=12)
    start = {n: p.detach().clone() for n, p in whole.module.named_parameters()}
    batch = _pairs(whole.tokenizer)
    one = whole.update_score_model(batch, _pair_loss)
    torch.save({"model_dir": model_dir, "micro": 2, "batch": batch}, tmp_path / "inputs.pt")
    run_ranks(Path(__file__).with_name("score_two_rank_worker.py"), tmp_path, timeout=300)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    for name in ("score_model/loss", "score_model/accuracy", "score_model/grad_norm"):
        mean = sum(rank["metrics"][name] for rank in ranks) / 2  # as the worker group averages
        assert mean == pytest.approx(one[name], rel=1e-4), name
    for name, after in whole.module.named_parameters():
        step_one, step_two = after.detach() - start[name], ranks[0]["weights"][name] - start[name]
        torch.testing.assert_close(step_two, step_one, atol=1e-6, rtol=1e-3, msg=name)


def test_a_batch_of_half_pairs_is_refused(model_dir: Path) -> None:
    engine = _engine(model_dir, micro=4)
    batch = _pairs(engine.tokenizer).index(range(5))
    with pytest.raises(hfsdk.HfsdkError, match="whole number of groups of 2"):
        engine.update_score_model(batch, _pair_loss)


def test_the_export_scores_as_a_reward_role(model_dir: Path, tmp_path: Path) -> None:
    engine = _engine(model_dir, micro=4)
    batch = _pairs(engine.tokenizer)
    engine.update_score_model(batch, _pair_loss)
    trained = engine.compute_scores(batch)["rm_scores"]
    engine.export_hf(tmp_path / "rm")
    reward = create_engine("reward", FSDPRoleConfig(model_path=str(tmp_path / "rm")), kind="score")
    torch.testing.assert_close(reward.compute_scores(batch)["rm_scores"], trained)
