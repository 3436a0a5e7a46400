"""SFT's step() against fake roles: one update on the supervised batch; val/loss by hand."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import hfsdk
from hfsdk import AlgorithmContext, Batch
from hfsdk_testing import Call, FakeRole, FakeSignal


def _program(  # type: ignore[no-untyped-def]
    *overrides: str, actor: type[FakeRole] = FakeRole, prompts: Any = None, tokenizer: Any = None
):
    from hfsdk import load_tokenizer
    from hfsdk.core.config import load_run_config

    spec = hfsdk.get_registry("algorithms")["sft"].impl
    log: list[Call] = []
    context = AlgorithmContext(
        config=load_run_config("sft", None, list(overrides)),
        roles={"actor": actor("actor", log, seed=0, kind="policy")},
        signals={"reward": FakeSignal("reward", log, [0.0])},
        spec=spec,
        prompts=prompts,
        tokenizer=tokenizer or load_tokenizer(str(hfsdk.default_task_assets().tokenizer_dir)),
    )
    return spec.program(context), log


ROWS = Batch.from_dict(
    non_tensors={"prompt": ["3 + 5 =", "9 + 9 ="], "answer": ["8", "18"], "uid": [0, 1]}
)


def test_step_is_one_update_on_the_answers() -> None:
    algorithm, log = _program()
    metrics = algorithm.step(ROWS)
    assert [(c.role, c.method) for c in log] == [("actor", "update_actor")]
    update = algorithm.context.roles["actor"].batches["update_actor"]
    tokenizer = algorithm.tokenizer
    assert tokenizer.convert_ids_to_tokens(update["responses"][1].tolist()) == ["18", "</s>"]
    assert update["response_mask"].tolist() == [[1, 1], [1, 1]]
    assert metrics["sft/trained_tokens"] == 4.0


def test_validation_loss_is_the_mean_token_nll() -> None:
    algorithm, log = _program()
    metrics = algorithm.validation_metrics(ROWS)
    seen = algorithm.context.roles["actor"].batches["compute_log_prob"]
    assert [(c.role, c.method) for c in log] == [("actor", "compute_log_prob")]
    # FakeRole's log-probs are drawn from its seeded generator: redraw them the same way.
    gen = torch.Generator().manual_seed(0)
    mask = seen["response_mask"].float()
    log_probs = -(torch.rand(mask.shape, generator=gen) * mask)
    assert metrics["val/loss"] == pytest.approx(float(-(log_probs * mask).sum() / mask.sum()))


def test_validation_rows_without_responses_get_no_loss() -> None:
    algorithm, log = _program()
    prompts_only = Batch.from_dict(non_tensors={"prompt": ["3 + 5 ="], "uid": [0]})
    assert algorithm.validation_metrics(prompts_only) == {}
    assert log == []


def test_rows_over_max_length_are_dropped_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    algorithm, _ = _program("algorithm.max_length=8")
    rows = Batch.from_dict(
        non_tensors={"prompt": ["3 + 5 =", "3 + 5 + 9 ="], "answer": ["8", "17"], "uid": [0, 1]}
    )
    with caplog.at_level("WARNING"):
        for _ in range(2):
            assert algorithm.step(rows)["sft/dropped_rows"] == 1.0
    # Before: only the metric said so; the run's log said nothing.
    said = [r for r in caplog.records if "longer than algorithm.max_length=8" in r.getMessage()]
    assert len(said) == 1


class _NLLActor(FakeRole):
    """An actor whose update reports the objective and the per-token NLL apart, as the
    workers' do under ``loss_agg_mode: seq-mean-token-sum`` (measured: 15.05 and 3.255)."""

    def update_actor(self, batch: Batch) -> dict[str, float]:
        self._record("update_actor", batch)
        return {"actor/pg_loss": 15.05, "actor/nll": 3.255}


def test_sft_loss_is_the_per_token_nll_not_the_aggregated_objective() -> None:
    algorithm, _ = _program("algorithm.loss_agg_mode=seq-mean-token-sum", actor=_NLLActor)
    metrics = algorithm.step(ROWS)
    # Before: sft/loss copied actor/pg_loss (15.05), unlike val/loss (a per-token mean).
    assert metrics["sft/loss"] == pytest.approx(metrics["actor/nll"])


class _Stream:
    """A prompt stream handing out ``batches`` in order (the trainer's loader stands here)."""

    def __init__(self, *batches: Batch) -> None:
        self.batches = list(batches)
        self.sizes: list[int | None] = []

    def next_batch(self, n: int | None = None) -> Batch:
        self.sizes.append(n)
        return self.batches.pop(0)


LONG = Batch.from_dict(
    non_tensors={"prompt": ["3 + 5 + 9 =", "9 + 9 + 9 ="], "answer": ["17", "27"], "uid": [2, 3]}
)


def test_a_step_whose_rows_are_all_too_long_draws_the_next_rows() -> None:
    stream = _Stream(LONG, ROWS)
    algorithm, log = _program("algorithm.max_length=8", prompts=stream)
    metrics = algorithm.step(LONG)
    # Before: "every row of this step is longer than algorithm.max_length=8": the run (and
    # each resume) stopped at this step.
    assert stream.sizes == [2, 2] and not stream.batches  # two redraws of the step's size
    assert [(c.role, c.method) for c in log] == [("actor", "update_actor")]
    assert metrics["sft/dropped_rows"] == 4.0  # the step's two and the first redraw's two
    assert metrics["sft/trained_tokens"] == 4.0  # ROWS: "8 </s>" and "18 </s>"


def test_rows_all_too_long_without_a_stream_to_draw_from_are_refused() -> None:
    algorithm, log = _program("algorithm.max_length=8")
    with pytest.raises(hfsdk.HfsdkError, match=r"longer than algorithm.max_length=8 tokens"):
        algorithm.step(LONG)
    assert log == []


def _loaded(rows: list[dict[str, Any]], algorithm: Any) -> Batch:
    """``rows`` as the run's loader gives them to validation (every kept row, in order)."""
    from hfsdk_datasets.prompt_dataset import PromptLoader

    config = algorithm.config.data
    return PromptLoader(rows, algorithm.tokenizer, config, seed=0, validation=True).whole()


@pytest.mark.parametrize("template", [False, True])
def test_validation_samples_after_the_conversations_context_not_its_answer(template: bool) -> None:
    # data.prompt_key=messages (docs/algorithms.md): the loader renders the whole conversation
    # as the prompt. Before: validation sampled after "user: 3 + 5 =\nassistant: 8\nassistant:"
    # (with a template: a prefill of the answer "8"), so it scored copies of the answer.
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    user = {"role": "user", "content": "3 + 5 ="}
    algorithm, log = _program(
        "data.prompt_key=messages", tokenizer=qwen25_tokenizer() if template else None
    )
    conversation = [user, {"role": "assistant", "content": "8"}]
    rows = [{"messages": conversation, "answer": "8"}, {"messages": [user], "answer": "8"}]
    batch = algorithm.generate(_loaded(rows, algorithm), n=1, greedy=True)
    seen = algorithm.context.roles["actor"].batches["generate_sequences"]
    expected = _loaded([{"messages": [user], "answer": "8"}] * 2, algorithm)
    assert seen["input_ids"].tolist() == expected["input_ids"].tolist()
    assert seen["attention_mask"].tolist() == expected["attention_mask"].tolist()
    for key in ("raw_prompt", hfsdk.PROMPT_MESSAGES, hfsdk.RENDERED_PROMPT):
        assert list(seen[key]) == list(expected[key])
    assert list(batch["messages"]) == [conversation, [user]]  # the row's own column is kept
    assert [(c.role, c.method) for c in log] == [("actor", "generate_sequences")]
