"""Validation: step 0 before training, mean@n / pass@k from n samples, the samples file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import ConfigError
from hfsdk.core.trainer.trainer import Trainer
from hfsdk.core.trainer.trainer_config import TrainerConfig
from hfsdk_validation.pass_at_k import pass_at_k
from hfsdk_validation.validation import _answers, estimator_metrics, validate

SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
]


class _FakeAlgorithm:
    """Generates n 'responses' per prompt whose scores the fake scorer reads back."""

    def __init__(self, scores: list[float], sources: list[str]) -> None:
        self.scores, self.sources = scores, sources

    def generate(self, prompts: Batch, *, n: int, greedy: bool) -> Batch:
        assert len(self.scores) == len(prompts) * n and greedy == (n == 1)
        return Batch.from_dict(
            tensors={"score": torch.tensor(self.scores)},
            non_tensors={
                "response_text": [f"answer {int(s * 10)}" for s in self.scores],
                "raw_prompt": [f"q{i // n}" for i in range(len(self.scores))],
                "data_source": self.sources,
            },
        )


def _scorer(batch: Batch) -> tuple[torch.Tensor, dict]:
    return batch["score"], {}


def test_estimators_from_n_samples_per_prompt_and_per_source() -> None:
    # Two prompts of 4 samples: one right of four, then three right of four.
    scores = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    sources = ["gsm"] * 4 + ["math"] * 4
    prompts = Batch.from_dict(tensors={"x": torch.zeros(2)})
    trainer = TrainerConfig(val_n=4, val_samples=1, val_answer_pattern=r"answer (\d+)")
    result = validate(_FakeAlgorithm(scores, sources), prompts, _scorer, trainer)
    m = result.metrics
    assert m["val/mean@4"] == pytest.approx(0.5)
    assert m["val/pass@1"] == pytest.approx((0.25 + 0.75) / 2)
    assert m["val/pass@2"] == pytest.approx((pass_at_k(4, 1, 2) + pass_at_k(4, 3, 2)) / 2)
    assert m["val/pass@4"] == 1.0
    assert m["val/gsm/pass@1"] == pytest.approx(0.25) and m["val/math/pass@1"] == 0.75
    # maj@4: prompt 0's majority answer ("0", three votes) is wrong, prompt 1's ("10") right.
    assert m["val/maj@4"] == pytest.approx(0.5)
    assert result.samples == [{"prompt": "q0", "response": "answer 10", "score": 1.0}]


def test_k_above_n_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"val_k=\[8\] has k outside 1\.\.val_n=4"):
        load_run_config("grpo", None, ["trainer.val_n=4", "trainer.val_k=[8]"])


@pytest.mark.slow
def test_validation_before_training_is_step_0_with_samples(tmp_path: Path) -> None:
    overrides = [
        *SMALL,
        "trainer.total_steps=2",
        "trainer.val_every=2",
        "trainer.val_before_train=true",
        "trainer.val_n=2",
    ]
    records = Trainer(load_run_config("grpo", None, overrides), tmp_path, quiet=True).fit()
    assert [r["step"] for r in records] == [0, 1, 2]
    for record in (records[0], records[2]):
        assert {"val/mean@2", "val/pass@1", "val/pass@2"} <= record.keys()
        assert 0.0 <= record["val/pass@1"] <= record["val/pass@2"] <= 1.0
    assert "val/pass@1" not in records[1]
    lines = (tmp_path / "validation" / "step_0.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert set(first) == {"prompt", "response", "score"} and "=" in first["prompt"]


@pytest.mark.slow
def test_validation_before_training_alone_runs_with_val_every_0(tmp_path: Path) -> None:
    """verl's ``val_before_train`` validates whatever ``test_freq`` is; so does hfsdk's (the
    validation data was not even loaded at ``val_every=0``, and step 0 was silently skipped)."""
    overrides = [*SMALL, "trainer.total_steps=1", "trainer.val_before_train=true"]
    records = Trainer(load_run_config("grpo", None, overrides), tmp_path, quiet=True).fit()
    assert [r["step"] for r in records] == [0, 1]
    assert "val/pass@1" in records[0] and "val/pass@1" not in records[1]
    assert (tmp_path / "validation" / "step_0.jsonl").is_file()


def test_maj_at_k_is_0_when_no_response_matches_the_pattern() -> None:
    """A configured pattern logs val/maj@K (and per data_source) even when nothing matches:
    left out, a dashboard lost the series and ``trainer.keep_best: val/maj@K`` stopped the run."""
    assert estimator_metrics([1, 0, 0, 0], 2, [1, 2], 1.0, [None] * 4, "val/")["val/maj@2"] == 0.0
    scores, sources = [1.0, 0.0, 0.0, 0.0], ["gsm"] * 2 + ["math"] * 2
    prompts = Batch.from_dict(tensors={"x": torch.zeros(2)})
    trainer = TrainerConfig(val_n=2, val_answer_pattern=r"<answer>(\d+)</answer>")
    m = validate(_FakeAlgorithm(scores, sources), prompts, _scorer, trainer).metrics
    assert m["val/maj@2"] == 0.0 and m["val/gsm/maj@2"] == 0.0 and m["val/math/maj@2"] == 0.0
    # No pattern: no maj@K at all (there are no answers to vote with).
    m = validate(_FakeAlgorithm(scores, sources), prompts, _scorer, TrainerConfig(val_n=2)).metrics
    assert not any("maj@" in key for key in m)


def test_answer_is_the_group_that_matched_of_an_alternation() -> None:
    """``a (\\d+)|b (\\d+)``: the second alternative's group is the answer, not ``''``
    (the first group, which did not take part), so maj@k votes on real answers."""
    pattern = r"answer is (\d+)|\\boxed\{(\d+)\}"
    assert _answers([r"\boxed{5}", "answer is 3", r"answer is 3, \boxed{5}", "none"], pattern) == [
        "5",
        "3",
        "5",
        None,
    ]
    # Without groups the whole (last) match is the answer; an empty match is no answer.
    assert _answers(["1 then 22", "x"], r"\d+") == ["22", None]
    assert _answers(["abc"], r"\d*") == [None]
    answers = _answers([r"\boxed{7}", r"\boxed{5}", r"\boxed{5}"], pattern)
    assert estimator_metrics([0, 1, 1], 3, [3], 1.0, answers, "val/")["val/maj@3"] == 1.0
