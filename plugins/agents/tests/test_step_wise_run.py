"""A multi-segment rollout through a GRPO training step (in-process, tiny model, CPU).

The rollout is scripted (a registered backend serving requests), the rest is the
real run: the tool loop on the Qwen3-style template, the runner's rows, the reward
function, GRPO's advantages and the fsdp actor's log-probs and update. Half of each
prompt's trajectories think before calling the tool (the template drops the
thinking, so the answer is a second segment) and answer right; the others answer
wrong at once (one segment).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest
import torch

import hfsdk
from hfsdk import GenerationRequest, GenerationResult, RolloutBackend, RolloutConfig
from hfsdk.core.config import load_run_config
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_agents.requests import cut_at_stop
from hfsdk_testing.chat_templates import qwen3_tokenizer

pytestmark = pytest.mark.slow

N = 4
QUESTIONS = {"What is 3 + 4?": "7", "What is 12 + 30?": "42"}
THINK = "<think>\nI should call the tool to add the numbers first.\n</think>\n\n"


@attrs.frozen(kw_only=True)
class ScriptedConfig(RolloutConfig):
    """The scripted backend's ``rollout`` section."""

    backend: str = "scripted_thinking"
    max_response_length: int = 8
    temperature: float = 1.0


class ScriptedThinking(RolloutBackend):
    """Trajectories 0 and 1 of every four think, call ``add`` and answer; 2 and 3 guess."""

    serves_requests = True

    def __init__(self, config: ScriptedConfig, actor: Any) -> None:
        super().__init__(config, actor)
        self.order: dict[int, int] = {}  # a trajectory's first seed -> its arrival

    def generate_sequences(self, prompts: hfsdk.Batch) -> hfsdk.Batch:
        raise AssertionError("served request by request")

    async def generate_request(self, request: GenerationRequest) -> GenerationResult:
        tok = self.actor.tokenizer
        context = list(request.prompt_ids)
        turn = context.count(tok.convert_tokens_to_ids("</tool_response>"))
        first = self.order.setdefault(request.seed - turn, len(self.order))
        a, b = re.findall(r"What is (\d+) \+ (\d+)\?", tok.decode(context))[0]
        if first % 4 >= 2:
            text = "The answer is 5."
        elif turn == 0:
            call = f'{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}'
            text = f"{THINK}<tool_call>\n{call}\n</tool_call>"
        else:
            text = f"The answer is {int(a) + int(b)}."
        ids = [*tok.encode(text, add_special_tokens=False), tok.eos_token_id]
        return cut_at_stop(
            ids, [math.nan] * len(ids), set(request.stop_token_ids), request.max_new_tokens
        )


def says_answer(
    prompts: list[str], responses: list[str], answer: list[str], **_: Any
) -> list[float]:
    """1 when the response ends with the right answer."""
    return [float(r.rstrip().endswith(f"is {t}.")) for r, t in zip(responses, answer, strict=True)]


class _Plugin:
    batches: ClassVar[list[Any]] = []

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_rollout_backends(register: Any) -> None:
        register("scripted_thinking", ScriptedThinking, config_cls=ScriptedConfig)

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_reward_functions(register: Any) -> None:
        register("says_answer", says_answer)

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_step_observers(register: Any) -> None:
        class Keep(hfsdk.StepObserver):
            def on_step_trained(self, view: Any) -> None:
                _Plugin.batches.append(view.algorithm.last_batch)

        register("keep_batches", lambda config, run_dir: Keep())


@pytest.fixture
def plugin() -> Any:
    reset_plugin_manager()
    _Plugin.batches = []
    get_plugin_manager().pm.register(_Plugin, name="step_wise_test")
    yield _Plugin
    reset_plugin_manager()


def _assets(root: Path) -> dict[str, Any]:
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = qwen3_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(str(root / "model"))
    tok.save_pretrained(str(root / "model"))
    system = {"role": "system", "content": "You are a helpful assistant."}
    rows = [
        {"prompt": [system, {"role": "user", "content": q}], "answer": a}
        for q, a in QUESTIONS.items()
    ]
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = str(root / "model")
    return {
        "data": {
            "train_files": [str(root / "train.jsonl")],
            "batch_size": 2,
            "max_prompt_length": 400,
            "shuffle": False,
        },
        "trainer": {"total_steps": 1, "val_every": 0},
        "algorithm": {"n_samples_per_prompt": N},
        "actor": {"model_path": model, "mini_batch_size": 16, "micro_batch_size": 16},
        "reward": {"functions": [{"name": "says_answer"}]},
        "rollout": {
            "backend": "scripted_thinking",
            "multi_turn": {
                "tools": ["add"],
                "parser": "hermes",
                "renderer": "chat_template",
                "max_turns": 3,
                "max_response_tokens": 200,
            },
        },
    }


def test_a_multi_segment_rollout_trains_with_trajectory_level_advantages(
    plugin: Any, tmp_path: Path
) -> None:
    base = _assets(tmp_path)
    config = load_run_config("grpo", None, [], base=base)
    metrics = Trainer(config, tmp_path / "run", quiet=True).fit()
    (batch,) = plugin.batches
    segment_index = list(batch["segment_index"])
    # 2 prompts x 4 trajectories; the 4 that thought have two segments: 12 rows, not 8
    assert len(batch) == 12
    trajectory = list(batch["trajectory_id"])
    assert trajectory == [0, 0, 1, 1, 2, 3, 4, 4, 5, 5, 6, 7]
    assert segment_index == [0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0]
    two = [t for t in set(trajectory) if trajectory.count(t) == 2]
    uids = list(batch["uid"])
    assert [uids[trajectory.index(t)] for t in two] == [uids[0], uids[0], uids[6], uids[6]]
    # the trajectory's reward on every segment, at its last trained token
    scores = batch["token_level_scores"].sum(dim=-1).tolist()
    assert scores == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0] * 2
    assert metrics[0]["reward/mean"] == pytest.approx(0.5)  # per trajectory (rows: 8/12)
    assert metrics[0]["agent/segments_per_trajectory"] == pytest.approx(1.5)
    # the loss mask: the second segment's carried context is not trained, its answer is
    width = batch["responses"].shape[1]
    tok = qwen3_tokenizer()
    for row in (1, 3, 7, 9):
        present = batch["attention_mask"][row, -width:].bool()
        ids = batch["responses"][row][present].tolist()
        mask = batch["response_mask"][row][present].tolist()
        trained = tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
        context = tok.decode([t for t, m in zip(ids, mask, strict=True) if not m])
        assert re.fullmatch(r"The answer is \d+\.<\|im_end\|>", trained), trained
        assert "<tool_call>" in context and "<think>" not in context
    for row in (0, 2, 6, 8):  # the first segments: the thinking is trained
        trained = tok.decode(batch["responses"][row][batch["response_mask"][row].bool()].tolist())
        assert trained.startswith("<think>")
    # GRPO over each prompt's four trajectories: 1, 1, 0, 0 -> +-0.5 / sqrt(1/3) = +-0.866;
    # counting rows (1, 1, 1, 1, 0, 0) would give +0.645 and -1.291
    adv = batch["advantages"]
    mask = batch["response_mask"].bool()
    per_row = [float(adv[r][mask[r]].unique().item()) for r in range(len(batch))]
    right, wrong = 0.5 / (math.sqrt(1 / 3) + 1e-6), -0.5 / (math.sqrt(1 / 3) + 1e-6)
    assert per_row == pytest.approx([right] * 4 + [wrong] * 2 + [right] * 4 + [wrong] * 2)
    assert adv[~mask].abs().max() == 0
    # the actor trained on all twelve rows
    assert math.isfinite(metrics[0]["actor/pg_loss"]) and metrics[0]["actor/grad_norm"] > 0
