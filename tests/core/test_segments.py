"""Step-wise trajectories: rewards and advantages are the trajectory's, counted once."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from hfsdk import Batch, HfsdkError
from hfsdk.core.segments import last_segments, number_trajectories, trajectory_rows
from hfsdk_testing import FakeRun

# Prompt 0: trajectories A and B have two segments each and are right; C and D are one
# segment each and wrong. Prompt 1: E (three segments) right; F, G, H wrong.
LAYOUT = [  # (uid, trajectory, segments, reward)
    (0, "A", 2, 1.0),
    (0, "B", 2, 1.0),
    (0, "C", 1, 0.0),
    (0, "D", 1, 0.0),
    (1, "E", 3, 1.0),
    (1, "F", 1, 0.0),
    (1, "G", 1, 0.0),
    (1, "H", 1, 0.0),
]
WIDTH = 6


def segmented_batch() -> Batch:
    uid, name, index, truth = [], [], [], []
    for u, n, segments, reward in LAYOUT:
        for k in range(segments):
            uid.append(u)
            name.append(n)
            index.append(k)
            truth.append(reward)
    rows = len(uid)
    mask = torch.zeros(rows, WIDTH)
    for row, k in enumerate(index):
        mask[row, k : k + 2] = 1.0  # context first in later segments, then the model's turn
        mask[row, 4] = 1.0
    return Batch.from_dict(
        tensors={"response_mask": mask},
        non_tensors={
            "uid": uid,
            "name": name,
            "segment_index": index,
            "truth": truth,
            "response_text": ["sampled"] * rows,
        },
    )


class TruthSignal:
    """Scores each row with its ``truth`` column and keeps the rows it was asked about."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def __call__(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        self.seen.append(list(batch["name"]))
        return torch.tensor([float(t) for t in batch["truth"]]), {}


def _run(algo: str = "grpo", *overrides: str) -> tuple[FakeRun, TruthSignal]:
    signal = TruthSignal()
    run = FakeRun.for_algorithm(algo, list(overrides), signals={"reward": lambda _log: signal})
    return run, signal


def test_trajectories_are_read_off_the_segment_index() -> None:
    batch = number_trajectories(segmented_batch())
    rows = trajectory_rows(batch)
    assert rows is not None and rows.count == 8 and len(batch) == 12
    assert list(batch["trajectory_id"]) == [0, 0, 1, 1, 2, 3, 4, 4, 4, 5, 6, 7]
    assert list(last_segments(batch)["name"]) == list("ABCDEFGH")
    assert [batch["name"][i] for i in rows.last.tolist()] == list("ABCDEFGH")


def test_a_segment_out_of_order_is_refused() -> None:
    batch = segmented_batch()
    batch["segment_index"] = [0, 2, *list(batch["segment_index"])[2:]]
    with pytest.raises(HfsdkError, match="consecutive rows numbered 0, 1, 2"):
        trajectory_rows(batch)


def test_reward_is_scored_once_per_trajectory_and_given_to_every_segment() -> None:
    run, signal = _run()
    batch = segmented_batch()
    scores = run.algorithm.score(batch, "reward")
    assert signal.seen == [list("ABCDEFGH")]  # the last segments only
    want = torch.tensor([float(t) for t in batch["truth"]])
    assert torch.equal(scores.sum(dim=-1), want)
    assert scores[:, 4].tolist() == want.tolist()  # on each row's last trained token
    # the mean over trajectories (3 of 8 right), not over rows (7 of 12)
    assert run.algorithm.metrics["reward/mean"] == pytest.approx(3 / 8)


def _advantages(algo: str = "grpo", *overrides: str) -> tuple[Batch, list[float]]:
    run, _ = _run(algo, *overrides)
    batch = segmented_batch()
    batch["token_level_scores"] = run.algorithm.score(batch, "reward")
    batch["token_level_rewards"] = batch["token_level_scores"]
    run.algorithm.estimate_advantages(batch)
    mask = batch["response_mask"].bool()
    per_row = []
    for row in range(len(batch)):
        values = batch["advantages"][row][mask[row]]
        assert torch.all(values == values[0])  # one advantage over the row's trained tokens
        assert batch["advantages"][row][~mask[row]].abs().max() == 0  # none on context
        per_row.append(float(values[0]))
    return batch, per_row


def test_group_normalisation_counts_each_trajectory_once() -> None:
    batch, per_row = _advantages()
    names = list(batch["name"])
    by_name: dict[str, set[float]] = {}
    for name, value in zip(names, per_row, strict=True):
        by_name.setdefault(name, set()).add(round(value, 6))
    assert all(len(v) == 1 for v in by_name.values())  # segments share their trajectory's
    # prompt 0 over its four trajectories: scores 1, 1, 0, 0 -> mean 0.5, unbiased std
    # sqrt(1/3): +-0.866. Counting its six rows (1, 1, 1, 1, 0, 0) would give +0.645 / -1.291.
    std = math.sqrt(1 / 3)
    assert by_name["A"] == by_name["B"] == {round(0.5 / (std + 1e-6), 6)}
    assert by_name["C"] == by_name["D"] == {round(-0.5 / (std + 1e-6), 6)}
    # prompt 1: 1, 0, 0, 0 -> mean 0.25, std 0.5: E +1.5 (rows would say 1, 1, 1, 0, 0, 0)
    assert next(iter(by_name["E"])) == pytest.approx(0.75 / (0.5 + 1e-6), abs=1e-5)
    assert next(iter(by_name["F"])) == pytest.approx(-0.25 / (0.5 + 1e-6), abs=1e-5)


def test_rloo_baseline_leaves_each_trajectory_out_once() -> None:
    _batch, per_row = _advantages("grpo", "algorithm.advantage_estimator=rloo")
    # A: 1 - mean(B, C, D) = 1 - 1/3 (counting rows it would be 1 - 3/5)
    assert per_row[0] == pytest.approx(2 / 3)


def test_a_per_token_estimator_refuses_a_multi_segment_batch() -> None:
    run, _ = _run("ppo")
    batch = segmented_batch()
    batch["token_level_scores"] = run.algorithm.score(batch, "reward")
    batch["token_level_rewards"] = batch["token_level_scores"]
    batch["values"] = torch.zeros_like(batch["response_mask"])
    with pytest.raises(HfsdkError, match="not registered per_sequence=True") as info:
        run.algorithm.estimate_advantages(batch)
    assert "\n" not in str(info.value) and "'gae'" in str(info.value)


def test_one_segment_per_trajectory_changes_nothing() -> None:
    def plain(with_index: bool) -> Any:
        run, _ = _run()
        batch = last_segments(segmented_batch())
        if with_index:
            batch["segment_index"] = [0] * len(batch)
        else:
            batch.pop(non_tensor_keys=["segment_index"])
        batch["token_level_scores"] = run.algorithm.score(batch, "reward")
        batch["token_level_rewards"] = batch["token_level_scores"]
        run.algorithm.estimate_advantages(batch)
        return batch["advantages"]

    assert torch.equal(plain(True), plain(False))


def test_dispatch_padding_is_removed_by_trajectory() -> None:
    from hfsdk.core.workers.futures import CollectSpec
    from hfsdk.core.workers.protocols.builtins import collect_concat_batches

    batch = segmented_batch()
    # two ranks; the last input row (trajectory H) was padding, come back as A's two rows
    first, second = batch.index(slice(0, 6)), batch.index(slice(6, 12))
    padded = Batch.concat([second, batch.index(slice(0, 2))])
    out = collect_concat_batches([first, padded], CollectSpec(ranks=(0, 1), pad=1))
    assert list(out["name"]) == list(batch["name"])
