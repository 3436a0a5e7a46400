"""DAPO's rounds on a scripted actor: the group filter, overlong placement, padding, behaviour."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hfsdk import AlgorithmContext, Batch, HfsdkError, get_registry
from hfsdk.core.config import load_run_config
from hfsdk_dapo.padding import left_pad_rollout

PAD = 0


class _Prompts:
    """A prompt stream of ``width``-token prompts (one uid per prompt)."""

    def __init__(self, width: int) -> None:
        self.width, self.drawn = width, 0

    def next_batch(self, n: int | None = None) -> Batch:
        n = n or 2
        uids = [f"p{self.drawn + i}" for i in range(n)]
        self.drawn += n
        ids = torch.full((n, self.width), 7)
        return Batch.from_dict(
            tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
            non_tensors={"uid": uids},
        )


class _Actor:
    """Generates scripted responses: ``lengths[i]`` model tokens for sample ``i`` of a group,
    and optional tool tokens (attended, outside the loss mask) before the last model token."""

    def __init__(self, lengths: list[int], width: int, tool_tokens: int = 0) -> None:
        self.lengths, self.width, self.tool_tokens = lengths, width, tool_tokens
        self.calls = 0

    def generate_sequences(self, batch: Batch) -> Batch:
        self.calls += 1
        rows = len(batch)
        prompt_ids, prompt_mask = batch["input_ids"], batch["attention_mask"]
        responses = torch.full((rows, self.width), PAD)
        mask = torch.zeros(rows, self.width, dtype=torch.long)
        attn = torch.zeros(rows, self.width, dtype=torch.long)
        for row in range(rows):
            n = self.lengths[row % len(self.lengths)]
            responses[row, : n + self.tool_tokens] = 5
            attn[row, : n + self.tool_tokens] = 1
            mask[row, : n - 1] = 1
            mask[row, n - 1 + self.tool_tokens] = 1  # the last model token, after the tools
        full_mask = torch.cat([prompt_mask, attn], 1)
        return Batch.from_dict(
            tensors={
                "prompts": prompt_ids,
                "responses": responses,
                "input_ids": torch.cat([prompt_ids, responses], 1),
                "attention_mask": full_mask,
                "position_ids": (full_mask.cumsum(-1) - 1).clamp(min=0),
                "response_mask": mask,
            },
            non_tensors={"uid": list(batch["uid"])},
        )


def _algorithm(
    overrides: list[str], actor: _Actor, prompts: _Prompts, scores, pipeline: Any = None
) -> Any:
    config = load_run_config("dapo", None, ["algorithm.n_samples_per_prompt=4", *overrides])
    spec = get_registry("algorithms")["dapo"].impl

    def reward(batch: Batch):
        return torch.tensor(scores(batch), dtype=torch.float32), {}

    context = AlgorithmContext(
        config=config,
        roles={"actor": actor},
        signals={"reward": reward},
        spec=spec,
        prompts=prompts,
        pipeline=pipeline,
    )
    return spec.program(context)


def test_groups_are_filtered_on_accuracy_not_on_the_shaped_score() -> None:
    # Every answer correct (score 1), lengths 2..5 of a budget of 6 with a 4-token buffer:
    # the overlong penalty makes the shaped scores differ, the accuracy does not.
    actor = _Actor([2, 3, 4, 5], width=6)
    algo = _algorithm(
        [
            "rollout.max_response_length=6",
            "algorithm.overlong_buffer_len=4",
            "algorithm.max_generation_rounds=1",
        ],
        actor,
        _Prompts(3),
        lambda batch: [1.0] * len(batch),
    )
    batch = algo._sample_informative(algo.prompts.next_batch(2))
    shaped = batch["token_level_scores"].sum(-1)
    assert len(set(shaped.tolist())) > 1  # the shaping did make them differ
    assert algo.metrics["dynamic_sampling/groups_kept"] == 0.0
    assert algo.metrics["dynamic_sampling/groups_dropped"] == 2.0


def test_groups_whose_accuracy_differs_are_kept() -> None:
    actor = _Actor([2, 3, 4, 5], width=6)
    algo = _algorithm(
        ["rollout.max_response_length=6", "algorithm.max_generation_rounds=1"],
        actor,
        _Prompts(3),
        lambda batch: [float(i % 2) for i in range(len(batch))],
    )
    batch = algo._sample_informative(algo.prompts.next_batch(2))
    assert algo.metrics["dynamic_sampling/groups_kept"] == 2.0
    assert batch["accuracy"].tolist() == [0.0, 1.0] * 4


def test_multi_turn_overlong_penalty_counts_tool_tokens_and_sits_on_a_model_token() -> None:
    # 3 model tokens and 4 tool tokens: the response is 7 tokens long; the last model token
    # sits at position 6 (after the tools). Budget: the multi-turn width 8, buffer 4: free
    # up to 4 tokens, so the penalty is -(7 - 4) / 4 = -0.75.
    actor = _Actor([3], width=8, tool_tokens=4)
    algo = _algorithm(
        [
            "rollout.max_response_length=2",
            "rollout.multi_turn.max_response_tokens=8",
            "rollout.multi_turn.tools=[add]",
            "algorithm.overlong_buffer_len=4",
        ],
        actor,
        _Prompts(3),
        lambda batch: [0.0] * len(batch),
    )
    batch = algo._scored(algo.prompts.next_batch(1), 0)
    penalty = batch["token_level_scores"][0]
    assert float(penalty[6]) == pytest.approx(-0.75)
    assert float(penalty.abs().sum()) == pytest.approx(0.75)  # nowhere else (not on a tool)
    assert int(batch["response_mask"][0, 6]) == 1


def test_rounds_of_different_prompt_widths_concatenate_as_if_padded_first() -> None:
    actor = _Actor([2, 3], width=4)
    generated = actor.generate_sequences(_Prompts(3).next_batch(2))
    padded = left_pad_rollout(generated, 5)
    assert padded["input_ids"].shape == (2, 9) and padded["prompts"].shape == (2, 5)
    assert padded["attention_mask"][:, :2].sum() == 0
    # Positions of the real tokens are unchanged: the padding is invisible to the model.
    real = padded["attention_mask"].bool()
    assert torch.equal(
        padded["position_ids"][real], generated["position_ids"][generated["attention_mask"].bool()]
    )
    assert torch.equal(padded["responses"], generated["responses"])
    assert left_pad_rollout(generated, 3) is generated


def test_rounds_concatenate_on_the_columns_they_share() -> None:
    from hfsdk_dapo.dapo_algorithm import _concat_rounds

    ahead = Batch.from_dict(
        tensors={"responses": torch.ones(2, 3), "token_versions": torch.zeros(2, 3)},
        non_tensors={"uid": ["0:a", "0:a"]},
    )
    now = Batch.from_dict(
        tensors={"responses": torch.zeros(2, 3)}, non_tensors={"uid": ["1:b"] * 2}
    )
    out = _concat_rounds([ahead, now])
    assert out.tensor_keys == ["responses"] and len(out) == 4
    assert list(out["uid"]) == ["0:a", "0:a", "1:b", "1:b"]


class _PartialAhead:
    """A pipeline that generated the step's first round ahead as a partial rollout (per-token
    ``token_versions``), measured as the real pipeline measures it."""

    def __init__(self, first: Batch, version: int, depth: int) -> None:
        self.first: Batch | None = first
        self.version, self.depth = version, depth

    def generated(self, prompts: Batch) -> tuple[Batch, dict[str, float]] | None:
        if self.first is None:
            return None
        out, self.first = self.first, None
        return out, self.token_staleness_metrics(out)

    def token_staleness_metrics(self, out: Batch) -> dict[str, float]:
        from hfsdk_pipelines.pipeline import GenerationPipeline

        return GenerationPipeline.token_staleness_metrics(self, out)  # type: ignore[arg-type]


def test_partial_rollout_staleness_is_measured_over_the_trained_tokens() -> None:
    """Step 4 (version 3, max_staleness 2): the first round came through the pipeline with
    per-token versions; its dropped group (p0, all correct) sampled at staleness 1, its kept
    group (p1) at 2. A second round refills one group, generated now (staleness 0). The
    metrics are the trained tokens': 14 at staleness 2 and 14 at 0, none at 1."""
    pytest.importorskip("hfsdk_pipelines")
    actor = _Actor([2, 3, 4, 5], width=6)  # 2 + 3 + 4 + 5 = 14 response tokens a group
    prompts = _Prompts(3)
    drawn = prompts.next_batch(2)
    first = actor.generate_sequences(drawn.repeat(4, interleave=True))
    stale = [1.0 if uid == "p0" else 2.0 for uid in first["uid"]]
    first["token_versions"] = 3.0 - torch.tensor(stale)[:, None].expand(-1, 6)
    actor.calls = 0

    def scores(batch: Batch) -> list[float]:
        return [1.0 if u.endswith(":p0") else float(i % 2) for i, u in enumerate(batch["uid"])]

    algo = _algorithm(
        ["rollout.max_response_length=6", "algorithm.max_generation_rounds=2"],
        actor,
        prompts,
        scores,
        pipeline=_PartialAhead(first, version=3, depth=2),
    )
    batch = algo._sample_informative(drawn)
    assert actor.calls == 1 and algo.metrics["dynamic_sampling/generation_rounds"] == 2.0
    assert sorted(set(batch["uid"])) == ["0:p1", "1:p2"]
    got = {k: v for k, v in algo.metrics.items() if k.startswith("async/staleness")}
    assert got == {
        "async/staleness_max": 2.0, "async/staleness_mean": 1.0, "async/staleness_hist_0": 0.5,
        "async/staleness_hist_1": 0.0, "async/staleness_hist_2": 0.5,
    }  # fmt: skip
    # the later round's tokens are tagged with the current version: it reached the batch
    assert batch["token_versions"][batch["response_mask"].bool()].unique().tolist() == [1.0, 3.0]


def test_overlong_penalty_mean_is_the_trained_rows_not_the_last_rounds() -> None:
    """Round 0: every response hits the 6-token limit (penalty -1); group p0 (all correct) is
    dropped, p1 kept. Round 1: 2-token responses (no penalty), one group kept. The trained
    rows' penalties are [-1] * 4 + [0] * 4: the metric is -0.5 (it was the last round's 0.0),
    and the per-row column does not reach the trained batch."""
    actor = _Actor([6, 6, 6, 6], width=6)
    generate = actor.generate_sequences

    def first_long_then_short(batch: Batch) -> Batch:
        out = generate(batch)
        actor.lengths = [2, 2, 2, 2]
        return out

    actor.generate_sequences = first_long_then_short  # type: ignore[method-assign]

    def scores(batch: Batch) -> list[float]:
        return [1.0 if u.endswith("p0") else float(i % 2) for i, u in enumerate(batch["uid"])]

    algo = _algorithm(
        [
            "rollout.max_response_length=6",
            "algorithm.overlong_buffer_len=4",
            "algorithm.max_generation_rounds=2",
        ],
        actor,
        _Prompts(3),
        scores,
    )
    batch = algo._sample_informative(algo.prompts.next_batch(2))
    assert sorted(set(batch["uid"])) == ["0:p1", "1:p2"]
    assert algo.metrics["overlong/penalty_mean"] == pytest.approx(-0.5)
    assert "overlong_penalty" not in batch


class _TrainingActor(_Actor):
    """A scripted actor that also takes the update, keeping the batch it was handed."""

    def __init__(self, lengths: list[int], width: int) -> None:
        super().__init__(lengths, width)
        self.trained: Batch | None = None

    def compute_log_prob(self, batch: Batch) -> Batch:
        zeros = torch.zeros(batch["response_mask"].shape)
        return Batch.from_dict(tensors={"old_log_probs": zeros})

    def update_actor(self, batch: Batch) -> dict[str, float]:
        self.trained = batch
        return {}


def test_a_step_whose_filter_kept_no_group_trains_on_zero_advantages() -> None:
    """Every answer correct in both rounds, lengths 5, 5, 5, 6 of a budget of 6 with a
    4-token buffer: the overlong shaping makes the 6-token answer score lower, so the group
    statistics would give full-size advantages to a pure length signal the filter rejected.
    The step trains on the last round with every advantage 0 instead."""
    actor = _TrainingActor([5, 5, 5, 6], width=6)
    algo = _algorithm(
        [
            "rollout.max_response_length=6",
            "algorithm.overlong_buffer_len=4",
            "algorithm.max_generation_rounds=2",
        ],
        actor,
        _Prompts(3),
        lambda batch: [1.0] * len(batch),
    )
    metrics = algo.step(algo.prompts.next_batch(2))
    assert metrics["dynamic_sampling/groups_kept"] == 0.0
    assert metrics["dynamic_sampling/generation_rounds"] == 2.0
    assert actor.trained is not None and len(actor.trained) == 8
    assert set(actor.trained["uid"]) == {"1:p2", "1:p3"}  # the last round, as before
    assert actor.trained["token_level_scores"].sum(-1).unique().numel() == 2  # shaped
    assert float(actor.trained["advantages"].abs().max()) == 0.0
    assert float(actor.trained["returns"].abs().max()) == 0.0


def test_a_step_with_kept_groups_keeps_their_advantages() -> None:
    actor = _TrainingActor([2, 3, 4, 5], width=6)
    algo = _algorithm(
        ["rollout.max_response_length=6", "algorithm.max_generation_rounds=1"],
        actor,
        _Prompts(3),
        lambda batch: [float(i % 2) for i in range(len(batch))],
    )
    algo.step(algo.prompts.next_batch(2))
    assert actor.trained is not None
    assert float(actor.trained["advantages"].abs().max()) > 0.5


def test_a_non_finite_score_is_refused_naming_the_rows() -> None:
    """A reward model can return NaN: the group would look informative (NaN differs from
    every score, itself included) and its advantages would silently be 0."""
    nan = float("nan")
    algo = _algorithm(
        ["rollout.max_response_length=6", "algorithm.max_generation_rounds=2"],
        _Actor([2, 3, 4, 5], width=6),
        _Prompts(3),
        lambda batch: [
            nan if u.endswith(":p1") else float(i % 2) for i, u in enumerate(batch["uid"])
        ],
    )
    with pytest.raises(
        HfsdkError, match=r"^4 of 8 rows were scored non-finite .*first: row 4, uid 'p1'"
    ):
        algo._sample_informative(algo.prompts.next_batch(2))
