"""SFT end to end (in-process, one device): variants agree, the export trains under GRPO, it learns."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer


def _run(tmp: Path, name: str, *overrides: str) -> list[dict]:
    config = load_run_config("sft", overrides=list(overrides))
    return Trainer(config, tmp / name, quiet=True).fit()


@pytest.mark.slow
def test_short_run_reports_losses_and_its_export_is_an_rl_start(tmp_path: Path) -> None:
    rows = _run(tmp_path, "sft", "trainer.total_steps=2", "trainer.val_every=2")
    by_step = {r["step"]: r for r in rows}
    # Cold model: the validation loss starts near log(vocabulary) and the greedy reward is
    # measured by the task's reward function on greedy samples.
    assert by_step[0]["val/loss"] > 2.5
    assert 0.0 <= by_step[0]["val/reward_mean"] <= 1.0
    assert by_step[2]["val/loss"] < by_step[0]["val/loss"]
    assert all(math.isfinite(by_step[s]["sft/loss"]) for s in (1, 2))
    # The NLL the update trained on is the loss it reports (per token, as val/loss).
    assert by_step[1]["sft/loss"] == pytest.approx(by_step[1]["actor/nll"])
    assert by_step[1]["sft/trained_tokens"] == 2 * 32  # the answer and </s> of 32 rows
    export = tmp_path / "sft" / "checkpoints" / "step_2" / "actor_hf"
    assert (export / "config.json").is_file()
    # An RL run takes the export as its actor (and reference) model as is.
    grpo = Trainer(
        load_run_config("grpo", overrides=[f"actor.model_path={export}", "trainer.total_steps=1"]),
        tmp_path / "grpo",
        quiet=True,
    ).fit()
    assert math.isfinite(grpo[-1]["actor/pg_loss"])


@pytest.mark.slow
def test_lora_packing_checkpointing_and_megatron_train_on_the_same_first_loss(
    tmp_path: Path,
) -> None:
    base = ["trainer.total_steps=1", "trainer.val_before_train=false", "trainer.val_every=0"]
    plain = _run(tmp_path, "plain", *base)[-1]
    # LoRA starts at the base model (B = 0); packing and recomputation change no number.
    variant = _run(
        tmp_path,
        "variant",
        *base,
        "actor.lora.rank=4",
        "actor.packing=true",
        "actor.gradient_checkpointing=true",
    )[-1]
    assert variant["sft/loss"] == pytest.approx(plain["sft/loss"], rel=1e-5)
    assert variant["sft/trained_tokens"] == plain["sft/trained_tokens"]
    # The megatron backend runs the same program and loss (its own kernels: float tolerance).
    megatron = _run(tmp_path, "megatron", *base, "actor.backend=megatron")[-1]
    assert megatron["sft/loss"] == pytest.approx(plain["sft/loss"], rel=1e-4)


@pytest.mark.heavy
def test_sft_from_the_cold_model_raises_the_greedy_reward(tmp_path: Path) -> None:
    # Seeds 0 and 1 measured +0.44 and +0.56 (32 validation prompts; shared CPU machine).
    gains = []
    for seed in (0, 1):
        rows = _run(tmp_path, f"seed{seed}", f"trainer.seed={seed}")
        val = [r for r in rows if "val/reward_mean" in r]
        gains.append(val[-1]["val/reward_mean"] - val[0]["val/reward_mean"])
        assert val[-1]["val/loss"] < val[0]["val/loss"] - 1.5
    assert sum(gains) / len(gains) >= 0.3, gains


@pytest.mark.slow
def _chat_data(tmp_path: Path) -> tuple[Path, Path]:
    """The default task's model with a chat template in its words, and its sums as chats."""
    import json
    import shutil

    import hfsdk
    from hfsdk import load_tokenizer

    assets = hfsdk.default_task_assets()
    model = tmp_path / "model"
    shutil.copytree(assets.model_dir, model)
    tokenizer = load_tokenizer(str(model))
    # A template in the task's words: the user turn ends with "=", the reply follows it.
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['content'] }} "
        "{% if m['role'] == 'user' %}= {% endif %}{% endfor %}"
    )
    tokenizer.save_pretrained(str(model))
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"{a} + {b}"},
                {"role": "assistant", "content": str(a + b)},
            ],
            "answer": str(a + b),
        }
        for a in range(10)
        for b in range(10)
    ]
    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return model, data


CHAT_RUN = (
    "data.prompt_key=messages",
    "trainer.total_steps=2",
    "trainer.val_before_train=true",
    "trainer.val_every=2",
    "data.batch_size=16",
    "actor.mini_batch_size=16",
    "actor.micro_batch_size=16",
)


def test_a_messages_dataset_trains_through_the_chat_template(tmp_path: Path) -> None:
    model, data = _chat_data(tmp_path)
    out = _run(
        tmp_path,
        "chat",
        f"actor.model_path={model}",
        f"data.train_files=[{data}]",
        f"data.val_files=[{data}]",
        "reward.functions=[{name: default_task}]",
        *CHAT_RUN,
    )
    by_step = {r["step"]: r for r in out}
    # Per row: the answer and </s> are trained; "a + b =" is the prompt.
    assert by_step[1]["sft/trained_tokens"] == 2 * 16
    assert by_step[2]["val/loss"] < by_step[0]["val/loss"]


def test_own_data_without_reward_functions_trains_and_validates_its_loss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hfsdk.core.cli.main import main

    # The docs' command: the reward only scores validation samples, so none is needed.
    model, data = _chat_data(tmp_path)
    settings = [f"actor.model_path={model}", f"data.train_files=[{data}]"]
    with pytest.raises(SystemExit) as info:
        main(["run", "--algo", "sft", "--run-dir", str(tmp_path / "run"), "--quiet",
              *settings, f"data.val_files=[{data}]", *CHAT_RUN])  # fmt: skip
    out, err = capsys.readouterr()
    assert info.value.code in (0, None), err
    assert "val/loss" in out and "nan" not in out  # the summary: no reward to show


def test_a_bad_row_anywhere_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    import json

    model, data = _chat_data(tmp_path)
    bad = {"messages": [{"role": "assistant", "content": "7"}, {"role": "user", "content": "?"}]}
    with data.open("a") as handle:  # the last of 101 rows: a step would meet it late
        handle.write(json.dumps(bad) + "\n")
    run = [f"actor.model_path={model}", f"data.train_files=[{data}]", *CHAT_RUN]
    with pytest.raises(HfsdkError, match=r"^row 100, 'messages': the conversation has an ass"):
        _run(tmp_path, "bad", *run, "data.shuffle=false")
    assert not (tmp_path / "bad").exists()  # refused before the run directory is made


def test_rows_past_the_models_positions_are_refused_unless_max_length_leaves_them_out(
    tmp_path: Path,
) -> None:
    import json

    model, _ = _chat_data(tmp_path)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 6}))
    rows = [{"prompt": f"{a} + 1", "completion": str(a + 1)} for a in range(8)]
    rows.append({"prompt": "3 + 4", "completion": "7 " * 6})  # the loader bounds prompts only
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = [f"actor.model_path={model}", f"data.train_files=[{data}]", *CHAT_RUN[1:],
           "algorithm.response_key=completion", "data.batch_size=4", "actor.mini_batch_size=4",
           "actor.micro_batch_size=4", "data.max_prompt_length=5", "rollout.max_response_length=1"]  # fmt: skip
    # Before: transformers only warned; the step failed (or trained past the context).
    with pytest.raises(HfsdkError, match=r"^row 8 is 11 tokens, more than the 6 positions"):
        _run(tmp_path, "long", *run)
    assert not (tmp_path / "long").exists()
    _run(tmp_path, "kept", *run, "algorithm.max_length=6")  # the row is left out instead


def test_tool_calling_conversations_train_their_calls_with_the_rows_tools(tmp_path: Path) -> None:
    import json

    from hfsdk import load_tokenizer

    model, _ = _chat_data(tmp_path)
    tokenizer = load_tokenizer(str(model))
    # Renders a call as "a + b" (the task's words), and "=" before each assistant turn when
    # the template is given the row's tools.
    tokenizer.chat_template = (
        "{% for m in messages %}{% if tools and m['role'] == 'assistant' %}= {% endif %}"
        "{% for c in m.get('tool_calls', []) %}"
        "{{ c['function']['arguments']['a'] }} + {{ c['function']['arguments']['b'] }} "
        "{% endfor %}{{ m['content'] }} {% if m['role'] == 'user' %}= {% endif %}{% endfor %}"
    )
    tokenizer.save_pretrained(str(model))
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    rows = []
    for a in range(4):
        call = {"id": "c", "type": "function",
                "function": {"name": "add", "arguments": json.dumps({"a": a, "b": 2})}}  # fmt: skip
        messages = [
            {"role": "user", "content": f"{a} + 2"},
            {"role": "assistant", "content": None, "tool_calls": [call]},  # OpenAI's form
            {"role": "tool", "tool_call_id": "c", "content": str(a + 2)},
            {"role": "assistant", "content": str(a + 2)},
        ]
        rows.append({"messages": messages, "tools": json.dumps(tools)})
    data = tmp_path / "calls.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = [f"actor.model_path={model}", f"data.train_files=[{data}]", *CHAT_RUN[:2],
           "trainer.total_steps=1", "data.batch_size=4", "actor.mini_batch_size=4",
           "actor.micro_batch_size=4"]  # fmt: skip
    (out,) = _run(tmp_path, "calls", *run)
    # Per row: "= a + 2" (the call), "= a+2" (the answer) and </s>; the tool's result is not.
    assert out["sft/trained_tokens"] == 7 * 4
