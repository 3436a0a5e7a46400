"""DPO's step() against fake roles: the calls it makes, what the update gets, exact metrics."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

import hfsdk
from hfsdk import ROW_GROUP, AlgorithmContext, Batch
from hfsdk_testing import Call, FakeRole, FakeSignal


def _program(overrides: list[str], tokenizer: Any = None):  # type: ignore[no-untyped-def]
    from hfsdk import load_tokenizer
    from hfsdk.core.config import load_run_config

    spec = hfsdk.get_registry("algorithms")["dpo"].impl
    config = load_run_config("dpo", None, overrides)
    log: list[Call] = []
    roles = {
        "actor": FakeRole("actor", log, seed=0, kind="policy"),
        "reference": FakeRole("reference", log, 1, kind="frozen_policy"),
    }
    tokenizer = tokenizer or load_tokenizer(str(hfsdk.default_task_assets().tokenizer_dir))
    context = AlgorithmContext(
        config=config,
        roles=roles,
        signals={"reward": FakeSignal("reward", log, [0.0])},
        spec=spec,
        tokenizer=tokenizer,
    )
    return spec.program(context), log


def _rows() -> Batch:
    rows = [
        {"prompt": "3 + 5 =", "chosen": "8", "rejected": "9", "uid": 0},
        {"prompt": "1 + 1 =", "chosen": "2", "rejected": "ugh 7", "uid": 1},
        {"prompt": "0 + 4 =", "chosen": "4", "rejected": "12", "uid": 2},
    ]
    return Batch.from_dict(non_tensors={k: [r[k] for r in rows] for k in rows[0]})


def test_step_is_log_probs_then_one_update_on_whole_pairs() -> None:
    algorithm, log = _program(["policy_loss.beta=0.5"])
    metrics = algorithm.step(_rows())
    assert [(c.role, c.method) for c in log] == [
        ("actor", "compute_log_prob"),
        ("reference", "compute_ref_log_prob"),
        ("actor", "update_actor"),
    ]
    actor = algorithm.context.roles["actor"]
    update = actor.batches["update_actor"]
    assert len(update) == 6 and update.meta[ROW_GROUP] == 2
    mask = update["response_mask"].float()
    # The dpo loss reads the reference's log-probs as old_log_prob and ±1 labels as advantages.
    assert torch.equal(update["old_log_probs"], update["ref_log_probs"])
    assert (
        update["advantages"].tolist()
        == (torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])[:, None] * mask).tolist()
    )
    # The rejected "ugh 7" is three tokens (ugh, 7, </s>), the others two.
    assert mask.sum(dim=-1).tolist() == [2.0, 2.0, 2.0, 3.0, 2.0, 2.0]
    # The logged dpo/* are the policy's (not the reference's) log-probs against the reference.
    from hfsdk_dpo.dpo_algorithm import preference_metrics

    seen = algorithm.last_batch
    assert not torch.equal(seen["old_log_probs"], seen["ref_log_probs"])
    expected = preference_metrics(seen["old_log_probs"], seen["ref_log_probs"], mask, 0.5)
    assert {k: metrics[k] for k in expected} == pytest.approx(expected)
    assert math.isfinite(metrics["dpo/loss"])
    assert metrics["dpo/dropped_pairs"] == 0.0


def test_no_kl_to_the_reference_is_reported() -> None:
    # finish()'s k3 over the dataset's tokens (not the policy's samples) read about 4x the
    # KL to the reference, logged as actor/kl: DPO's step and its replay report none.
    algorithm, _ = _program([])
    metrics = algorithm.step(_rows())
    assert "actor/kl" not in metrics
    assert "actor/kl" not in algorithm.finish(algorithm.last_batch)


def test_metrics_equal_the_hand_computation() -> None:
    from hfsdk_dpo.dpo_algorithm import preference_metrics

    lp = torch.tensor([[-1.0, -2.0], [-0.5, 0.0], [-3.0, -1.0], [-1.0, -1.0]])
    ref = torch.tensor([[-2.0, -2.0], [-1.0, 0.0], [-1.0, -1.0], [-2.0, -1.0]])
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1]])
    got = preference_metrics(lp, ref, mask, beta=0.5)
    # pair 0: chosen 0.5·(1 + 0) = 0.5, rejected 0.5·0.5 = 0.25; pair 1: -1.0 vs 0.5
    margins = [0.25, -1.5]
    assert got["dpo/reward_chosen"] == pytest.approx((0.5 - 1.0) / 2)
    assert got["dpo/reward_rejected"] == pytest.approx((0.25 + 0.5) / 2)
    assert got["dpo/reward_margin"] == pytest.approx(sum(margins) / 2)
    assert got["dpo/reward_accuracy"] == pytest.approx(0.5)
    expected = sum(math.log1p(math.exp(-m)) for m in margins) / 2
    assert got["dpo/loss"] == pytest.approx(expected)
    # With label smoothing, the loss the update takes (it reported the plain one before).
    smoothed = preference_metrics(lp, ref, mask, beta=0.5, label_smoothing=0.2)
    expected = sum(0.8 * math.log1p(math.exp(-m)) + 0.2 * math.log1p(math.exp(m)) for m in margins)
    assert smoothed["dpo/loss"] == pytest.approx(expected / 2)


def test_validation_rows_without_pairs_get_no_pair_metrics() -> None:
    algorithm, log = _program([])
    prompts_only = Batch.from_dict(non_tensors={"prompt": ["3 + 5 ="], "uid": [0]})
    assert algorithm.validation_metrics(prompts_only) == {}
    assert log == []
    metrics = algorithm.validation_metrics(_rows())
    assert set(metrics) == {
        "val/dpo/loss", "val/dpo/reward_accuracy", "val/dpo/reward_chosen",
        "val/dpo/reward_margin", "val/dpo/reward_rejected",
    }  # fmt: skip


def _loaded(rows: list[dict[str, Any]], algorithm: Any) -> Batch:
    """``rows`` as the run's loader gives them to validation (every kept row, in order)."""
    from hfsdk_datasets.prompt_dataset import PromptLoader

    config = algorithm.config.data
    return PromptLoader(rows, algorithm.tokenizer, config, seed=0, validation=True).whole()


def _said(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


USER = {"role": "user", "content": "3 + 5 ="}
OTHER = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "1 + 1 ="}]
LAYOUTS = {
    # data.prompt_key=chosen (docs/algorithms.md, implicit prompt): the loader renders the
    # whole chosen response as the prompt; the pair's prompt is what both begin with.
    "messages": (
        "chosen",
        [
            {"chosen": [USER, _said("8")], "rejected": [USER, _said("9")]},
            {"chosen": [*OTHER, _said("2")], "rejected": [*OTHER, _said("ugh 7")]},
        ],
        [{"chosen": [USER]}, {"chosen": OTHER}],
    ),
    "text": (
        "chosen",
        [
            {"chosen": "3 + 5 = 8", "rejected": "3 + 5 = 9"},
            {"chosen": "1 + 1 = 2", "rejected": "1 + 1 = ugh 7"},
        ],
        [{"chosen": "3 + 5 ="}, {"chosen": "1 + 1 ="}],
    ),
    # An explicit prompt column is the prompt already: sampled after as loaded.
    "explicit": (
        "prompt",
        [{"prompt": [USER], "chosen": [_said("8")], "rejected": [_said("9")]}],
        [{"prompt": [USER]}],
    ),
}


@pytest.mark.parametrize("template", [False, True])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_validation_samples_after_the_pairs_prompt_not_the_chosen_answer(
    layout: str, template: bool
) -> None:
    # Before: validation (with reward functions set) sampled after the whole chosen
    # response ("user: 3 + 5 =\nassistant: 8\nassistant:", with a template a prefill of "8"),
    # so it scored continuations of the reference answer.
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    prompt_key, rows, prompts = LAYOUTS[layout]
    tokenizer = qwen25_tokenizer() if template else None
    algorithm, log = _program([f"data.prompt_key={prompt_key}"], tokenizer=tokenizer)
    batch = algorithm.generate(_loaded(rows, algorithm), n=1, greedy=True)
    seen = algorithm.context.roles["actor"].batches["generate_sequences"]
    expected = _loaded(prompts, algorithm)
    assert seen["input_ids"].tolist() == expected["input_ids"].tolist()
    assert seen["attention_mask"].tolist() == expected["attention_mask"].tolist()
    for key in ("raw_prompt", hfsdk.PROMPT_MESSAGES, hfsdk.RENDERED_PROMPT):
        assert list(seen[key]) == list(expected[key])
    assert list(batch["chosen"]) == [row["chosen"] for row in rows]  # the rows' own columns
    assert [(c.role, c.method) for c in log] == [("actor", "generate_sequences")]
