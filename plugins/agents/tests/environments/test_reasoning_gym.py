"""reasoning-gym: rows generated offline, its verifier as the reward, end to end under GRPO."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from hfsdk import ConfigError, HfsdkError
from hfsdk_agents.environments.reasoning_gym_data import (
    reasoning_gym_rows,
    write_reasoning_gym_data,
)
from hfsdk_agents.environments.reasoning_gym_reward import reasoning_gym_reward

CONFIG = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


def test_rows_are_the_tasks_entries_and_the_reward_is_its_verifier() -> None:
    import reasoning_gym

    rows = reasoning_gym_rows("basic_arithmetic", size=6, seed=3, config=CONFIG)
    dataset = reasoning_gym.create_dataset("basic_arithmetic", seed=3, size=6, **CONFIG)
    assert [r["prompt"] for r in rows] == [e["question"] for e in dataset]
    assert rows == reasoning_gym_rows("basic_arithmetic", size=6, seed=3, config=CONFIG)
    columns = {k: [r[k] for r in rows] for k in rows[0] if k.startswith("rg_")}
    right = [f"<answer>{r['answer']}</answer>" for r in rows]
    assert reasoning_gym_reward([], right, **columns) == [1.0] * 6
    # no answer tag: reasoning-gym's extract_answer finds nothing, its score is 0
    assert reasoning_gym_reward([], [r["answer"] for r in rows], **columns) == [0.0] * 6
    # partial credit is the verifier's own: the right answer inside a longer one
    padded = [f"<answer>{r['answer']} 00</answer>" for r in rows]
    want = [
        dataset.score_answer(f"{r['answer']} 00", e) for r, e in zip(rows, dataset, strict=True)
    ]
    assert reasoning_gym_reward([], padded, **columns) == want
    assert all(0.0 < w < 1.0 for w in want)


@pytest.mark.parametrize(
    ("task", "answer"),
    [("prime_factorization", "2 x 3"), ("game_of_life", "{}"), ("coin_flip", "1e999999")],
)
def test_an_answer_the_verifier_raises_on_scores_zero(task: str, answer: str) -> None:
    # score_answer raised ValueError / KeyError / OverflowError: one odd response stopped a run.
    rows = reasoning_gym_rows(task, size=1, seed=0)
    columns = {k: [r[k] for r in rows] for k in rows[0] if k.startswith("rg_")}
    assert reasoning_gym_reward([], [f"<answer>{answer}</answer>"], **columns) == [0.0]


def test_a_stop_inside_the_verifier_is_not_a_wrong_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    import reasoning_gym

    rows = reasoning_gym_rows("basic_arithmetic", size=1, seed=3, config=CONFIG)
    columns = {k: [r[k] for r in rows] for k in rows[0] if k.startswith("rg_")}
    dataset = type(reasoning_gym.create_dataset("basic_arithmetic", seed=3, size=1, **CONFIG))

    def interrupted(self: object, answer: object, entry: object) -> float:
        raise KeyboardInterrupt

    monkeypatch.setattr(dataset, "score_answer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        reasoning_gym_reward([], ["<answer>1</answer>"], **columns)


def test_an_unknown_task_name_is_one_line() -> None:
    with pytest.raises(HfsdkError) as info:
        reasoning_gym_rows("basic_arithmetik", size=2)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("unknown reasoning_gym task 'basic_arithmetik'; available: ")
    assert "did you mean 'basic_arithmetic'?" in message


def test_a_config_the_task_refuses_is_one_line() -> None:
    with pytest.raises(HfsdkError) as info:
        reasoning_gym_rows("basic_arithmetic", size=2, config={"min_terms": 0})
    assert "\n" not in str(info.value)
    assert "reasoning_gym task 'basic_arithmetic' refused its config" in str(info.value)


@pytest.mark.slow
def test_grpo_logs_the_verifiers_scores(tmp_path: Path) -> None:
    import reasoning_gym

    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer
    from hfsdk_agents.environments.reasoning_gym_build import ensure_reasoning_gym_assets
    from hfsdk_agents.environments.reasoning_gym_task import reasoning_gym_preset

    base = reasoning_gym_preset(ensure_reasoning_gym_assets())
    config = load_run_config(
        "grpo", None, ["trainer.total_steps=2", "trainer.rollout_dump=true"], base=base
    )
    Trainer(config, tmp_path, quiet=True).fit()
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rows = {
        json.loads(line)["prompt"]: json.loads(line)
        for line in (Path(config.data.train_files[0])).read_text().splitlines()
    }
    seen = set()
    for step in (1, 2):
        lines = (tmp_path / "rollouts" / f"step_{step}.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        scores = []
        for record in records:
            row = rows[record["raw_prompt"]]
            dataset = reasoning_gym.create_dataset(
                row["rg_task"], seed=row["rg_seed"], size=row["rg_size"],
                **json.loads(row["rg_config"]),
            )  # fmt: skip
            entry = dataset[row["rg_index"]]
            answer = reasoning_gym.utils.extract_answer(record["response_text"])
            scores.append(dataset.score_answer(answer, entry))
            assert record["reward"] == pytest.approx(scores[-1], abs=1e-6)
        seen.update(scores)
        assert metrics[step - 1]["reward/mean"] == pytest.approx(
            sum(scores) / len(scores), abs=1e-6
        )
    # the warm start answers right about a third of the time: both outcomes occur
    assert 1.0 in seen and 0.0 in seen


def test_the_command_writes_the_rows_and_refuses_a_bad_name_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hfsdk.core.cli.main import main

    def run(*args: str) -> int:
        with pytest.raises(SystemExit) as info:
            main(["reasoning-gym", *args])
        return int(info.value.code or 0)

    config = json.dumps(CONFIG)
    assert run("basic_arithmetic", str(tmp_path), "--train-size", "4", "--config", config) == 0
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert rows == reasoning_gym_rows(
        "basic_arithmetic", size=4, seed=0, config=CONFIG, format_instruction="default"
    )
    val = (tmp_path / "val.jsonl").read_text().splitlines()
    assert len(val) == 100 and json.loads(val[0])["rg_seed"] == 4  # seed 0 + train_size 4
    capsys.readouterr()
    for args, says in [
        (("basic_arithmetik", str(tmp_path / "x")), "unknown reasoning_gym task"),
        (("basic_arithmetic", str(tmp_path / "x"), "--config", "{max"), "is not JSON"),
        (
            ("basic_arithmetic", str(tmp_path / "x"), "--format-instruction", "defualt"),
            "unknown format instruction 'defualt'",
        ),
    ]:
        assert run(*args) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "x").exists()  # before: a failed call left its folder behind


def test_sizes_below_one_are_refused_and_a_failed_val_keeps_the_old_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk_agents.environments import reasoning_gym_data

    with pytest.raises(ConfigError, match="train_size -5: give a number of rows >= 1"):
        write_reasoning_gym_data("basic_arithmetic", tmp_path, train_size=-5, val_size=2)
    write_reasoning_gym_data("basic_arithmetic", tmp_path, train_size=2, val_size=2, seed=0)
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    real = reasoning_gym_data.reasoning_gym_rows

    def val_fails(name: str, *, size: int, seed: int, config: object, **kwargs: object) -> list:
        if seed == 9:  # the validation part of seed 7 (7 + train_size 2; interrupted, say)
            raise KeyboardInterrupt
        return real(name, size=size, seed=seed, config=config, **kwargs)

    monkeypatch.setattr(reasoning_gym_data, "reasoning_gym_rows", val_fails)
    with pytest.raises(KeyboardInterrupt):
        write_reasoning_gym_data("basic_arithmetic", tmp_path, train_size=2, val_size=2, seed=7)
    # Before: train.jsonl was already seed 7's, val.jsonl still seed 0's.
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_the_reward_scores_the_written_entry_where_this_process_rebuilds_another() -> None:
    """polynomial_multiplication's entries depend on Python's hash seed: the reward rebuilt
    another question in the trainer's process and scored right answers 0."""
    rows = reasoning_gym_rows("basic_arithmetic", size=2, seed=3)
    written = json.loads(rows[0]["rg_entry"])
    assert written["question"] == rows[0]["prompt"]
    other = {**written, "question": "another question", "answer": "41"}  # as rebuilt elsewhere
    rows[0]["rg_entry"] = json.dumps(other)
    columns = {k: [r[k] for r in rows] for k in rows[0] if k.startswith("rg_")}
    # Row 0's rebuilt question differs from the written one: the written entry is scored.
    scores = reasoning_gym_reward(
        ["p", "p"], ["<answer>41</answer>", "<answer>x</answer>"], **columns
    )
    assert scores[0] == 1.0 and scores[1] == 0.0
    del columns["rg_entry"]  # rows written before the column: rebuilt, as before
    scores = reasoning_gym_reward(
        ["p"] * 2, [f"<answer>{r['answer']}</answer>" for r in rows], **columns
    )
    assert scores == [1.0, 1.0]


def test_a_config_that_fails_while_generating_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"could not generate its entries with config .*IndexErr"):
        reasoning_gym_rows(
            "spell_backward", size=3, config={"min_word_len": 40, "max_word_len": 50}
        )


@pytest.mark.parametrize("missing", ["reasoning_gym", "reasoning_gym.utils"])
def test_without_reasoning_gym_the_data_and_reward_give_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """Before: a bare import raised ModuleNotFoundError, reported as an internal error."""
    for module in ("reasoning_gym", "reasoning_gym.factory", "reasoning_gym.utils"):
        if missing == "reasoning_gym" or module == missing:
            monkeypatch.setitem(sys.modules, module, None)  # None: import raises ImportError
    hint = "pip install 'hfsdk-plugin-agents[environments]'"
    if missing == "reasoning_gym":
        # a seed no other test uses, so the dataset cache does not answer
        with pytest.raises(HfsdkError, match=re.escape(hint)):
            write_reasoning_gym_data(
                "basic_arithmetic", tmp_path, train_size=2, val_size=1, seed=811
            )
    columns = {
        "rg_task": ["basic_arithmetic"], "rg_seed": [812], "rg_size": [2],
        "rg_index": [0], "rg_config": ["{}"],
    }  # fmt: skip
    with pytest.raises(HfsdkError, match=re.escape(hint)):
        reasoning_gym_reward(["p"], ["<answer>1</answer>"], **columns)


@pytest.fixture(scope="module")
def built() -> Path:
    """The built-in task's cached build (the same one the GRPO test and runs use)."""
    from hfsdk_agents.environments.reasoning_gym_build import ensure_reasoning_gym_assets

    return ensure_reasoning_gym_assets()


def test_every_answer_of_the_built_task_is_a_word_of_its_tokenizer(built: Path) -> None:
    """Before: the vocabulary held -9..18 only, but basic_arithmetic also answers 19, 20 and
    -10 (operand 10): those rows mapped to ``<unk>`` and could never score 1."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(built / "model"))
    for split in ("train.jsonl", "val.jsonl"):
        answers = [json.loads(line)["answer"] for line in (built / split).read_text().splitlines()]
        ids = tokenizer.convert_tokens_to_ids(answers)
        assert [a for a, i in zip(answers, ids, strict=True) if i == tokenizer.unk_token_id] == []


def test_the_warm_start_answers_right_about_as_often_as_the_spec_says(built: Path) -> None:
    """Before: 120 warm-start steps left P(right) at 0.07, not the documented ~0.3."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(built / "model"))
    model = AutoModelForCausalLM.from_pretrained(str(built / "model")).eval()
    rows = [json.loads(line) for line in (built / "train.jsonl").read_text().splitlines()]
    tid = tokenizer.convert_tokens_to_ids
    probs = []
    with torch.no_grad():
        for row in rows[:64]:  # a sample, one at a time (the build measures all, batched)
            ids = [*tokenizer(row["prompt"]).input_ids, tid("<answer>")]
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
            probs.append(float(logits.softmax(-1)[tid(row["answer"])]))
    p_right = sum(probs) / len(probs)
    assert p_right >= 0.2
    info = json.loads((built / "info.json").read_text())
    assert info["p_right_train"] >= 0.2  # the build records it, over every training row


def test_the_command_tells_the_model_the_answer_format_the_reward_reads(tmp_path: Path) -> None:
    """Before: the prompt was the bare question, so a model following the recipe was never
    asked for <answer> tags and every reward was 0."""
    import reasoning_gym.utils

    from hfsdk.core.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["reasoning-gym", "basic_arithmetic", str(tmp_path), "--train-size", "2",
              "--val-size", "1"])  # fmt: skip
    assert info.value.code in (0, None)
    instruction = reasoning_gym.utils.SYSTEM_PROMPTS["default"].strip()
    for split in ("train.jsonl", "val.jsonl"):
        for line in (tmp_path / split).read_text().splitlines():
            row = json.loads(line)
            assert row["prompt"] == f"{instruction}\n\n{json.loads(row['rg_entry'])['question']}"
            assert "<answer>" in row["prompt"]
    # From Python (and in the built-in tiny task) the prompt stays the bare question.
    (bare,) = reasoning_gym_rows("basic_arithmetic", size=1)
    assert bare["prompt"] == json.loads(bare["rg_entry"])["question"]
    assert reasoning_gym_rows("basic_arithmetic", size=1, format_instruction="none") == [bare]
