"""Build the ``tool_use`` task's tokenizer, warm-started model and data once (cached).

The warm start fits the tiny Llama to a target policy given per position as a
distribution (soft labels, like the default task's):

- first response token: ``<tool_call>`` with ``p_call``, else a number (the right
  sum with ``p_direct`` more than uniform): answering at once is mostly a guess;
- the call's fixed words with certainty, except: each operand is copied right
  with ``p_copy`` (else any number), and the ``,`` between the arguments is there
  with ``p_comma`` (else ``</tool_call>``: a malformed call the parser rejects);
- after ``</tool_response>``: the tool's result with ``p_result``, else any number;
  then ``</s>``.

So calls are well-formed some of the time and right some of the time: a short
RL run raises both the reward and the tool-call success.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import attrs

from hfsdk_agents.tool_use.task import (
    CALL_CLOSE,
    CALL_OPEN,
    CALL_WORDS,
    MAX_OPERAND,
    RESPONSE_CLOSE,
    RESPONSE_OPEN,
    call_text,
    format_prompt,
    task_rows,
)
from hfsdk_agents.warm_start import cached_build, fit_token_distributions, tiny_llama_config

BUILDER_VERSION = 1


@attrs.frozen(kw_only=True)
class ToolUseSpec:
    """The task's size, the warm-start target policy and the model shape."""

    max_operand: int = MAX_OPERAND
    p_call: float = 0.5
    p_direct: float = 0.05
    p_copy: float = 0.8
    p_comma: float = 0.9
    p_result: float = 0.7
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 128
    warm_start_steps: int = 300
    warm_start_lr: float = 3e-3
    batch_rows: int = 256
    seed: int = 0

    @property
    def max_sum(self) -> int:
        """The largest answer."""
        return 2 * self.max_operand

    def cache_key(self) -> str:
        """A short hash of the spec and the builder version."""
        import hashlib

        text = json.dumps({"spec": attrs.asdict(self), "v": BUILDER_VERSION}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def corpus(spec: ToolUseSpec) -> list[str]:
    """Every word of the task: prompts, calls, responses and answers."""
    lines = []
    for a in range(spec.max_operand + 1):
        for b in range(spec.max_operand + 1):
            lines.append(
                f"{format_prompt(a, b)} {call_text(a, b)} {RESPONSE_OPEN} {a + b} "
                f"{RESPONSE_CLOSE} {a + b}"
            )
    return lines


def train_tokenizer(spec: ToolUseSpec) -> Any:
    """The word-level tokenizer (one token per word; decoding joins words with spaces)."""
    from hfsdk_tasks.tokenizer import word_level_tokenizer

    # No clean-up: tool calls' JSON punctuation must decode exactly as the model wrote it.
    return word_level_tokenizer(corpus(spec), max_length=64, cleanup=False)


def _targets(spec: ToolUseSpec, tokenizer: Any) -> tuple[Any, Any, Any]:
    """(input_ids, target distributions, weights) of the warm start (see the module doc)."""
    import torch

    vocab = len(tokenizer)
    tid = tokenizer.convert_tokens_to_ids
    operands = torch.tensor(tid([str(n) for n in range(spec.max_operand + 1)]))
    sums = torch.tensor(tid([str(n) for n in range(spec.max_sum + 1)]))

    def one(token: str) -> Any:
        t = torch.zeros(vocab)
        t[tid(token)] = 1.0
        return t

    def mix(ids: Any, right: int, p: float) -> Any:
        t = torch.zeros(vocab)
        t[ids] = (1.0 - p) / len(ids)
        t[right] += p
        return t

    rows, targets, weights = [], [], []
    for a in range(spec.max_operand + 1):
        for b in range(spec.max_operand + 1):
            s = a + b
            prompt = tokenizer(format_prompt(a, b)).input_ids
            call = tokenizer.encode(call_text(a, b), add_special_tokens=False)
            tool = tokenizer.encode(
                f"{RESPONSE_OPEN} {s} {RESPONSE_CLOSE}", add_special_tokens=False
            )
            answer = [*tokenizer.encode(str(s), add_special_tokens=False), tokenizer.eos_token_id]
            ids = prompt + call + tool + answer
            target = torch.zeros(len(ids), vocab)
            weight = torch.zeros(len(ids))
            first = len(prompt) - 1  # predicts the first response token
            start = mix(sums, int(sums[s]), spec.p_direct) * (1.0 - spec.p_call)
            start[tid(CALL_OPEN)] += spec.p_call
            target[first], weight[first] = start, 1.0
            words = [*CALL_WORDS[:4], str(a), CALL_WORDS[4], CALL_WORDS[5], str(b), CALL_WORDS[6]]
            for k, word in enumerate([*words, CALL_CLOSE]):
                pos = first + 1 + k
                if word == str(a) and k == 4:
                    target[pos] = mix(operands, int(operands[a]), spec.p_copy)
                elif word == str(b) and k == 7:
                    target[pos] = mix(operands, int(operands[b]), spec.p_copy)
                elif word == ",":
                    comma = one(",") * spec.p_comma
                    comma[tid(CALL_CLOSE)] += 1.0 - spec.p_comma
                    target[pos] = comma
                else:
                    target[pos] = one(word)
                weight[pos] = 1.0
            after_tool = len(prompt) + len(call) + len(tool) - 1
            target[after_tool] = mix(sums, int(sums[s]), spec.p_result)
            target[after_tool + 1] = one(tokenizer.eos_token)
            weight[after_tool] = weight[after_tool + 1] = 1.0
            rows.append(ids)
            targets.append(target)
            weights.append(weight)
            # The direct branch: a guessed number ends the response.
            direct = [*prompt, int(sums[s]), tokenizer.eos_token_id]
            t2 = torch.zeros(len(ids), vocab)
            w2 = torch.zeros(len(ids))
            t2[len(prompt)] = one(tokenizer.eos_token)
            w2[len(prompt)] = 1.0
            rows.append(direct + [tokenizer.pad_token_id] * (len(ids) - len(direct)))
            targets.append(t2)
            weights.append(w2)
    return torch.tensor(rows), torch.stack(targets), torch.stack(weights)


def build_model(spec: ToolUseSpec, tokenizer: Any) -> tuple[Any, dict[str, float]]:
    """The warm-started tiny Llama and what the warm start measured."""
    started = time.perf_counter()
    config = tiny_llama_config(spec, tokenizer, max_positions=128)
    ids, targets, weights = _targets(spec, tokenizer)
    model, loss = fit_token_distributions(
        spec, config, ids, targets, weights, batch_rows=spec.batch_rows
    )
    return model, {"final_loss": loss, "seconds": time.perf_counter() - started}


def ensure_tool_use_assets(spec: ToolUseSpec | None = None) -> Path:
    """The cached build directory (``model/``, ``train.jsonl``, ``val.jsonl``), built once."""
    spec = spec or ToolUseSpec()

    def build(staging: Path) -> None:
        tokenizer = train_tokenizer(spec)
        model, report = build_model(spec, tokenizer)
        model.save_pretrained(str(staging / "model"))
        tokenizer.save_pretrained(str(staging / "model"))
        rows = task_rows(spec.max_operand, spec.seed)
        for name, part in (("train.jsonl", rows), ("val.jsonl", rows[:32])):
            (staging / name).write_text("".join(json.dumps(r) + "\n" for r in part))
        (staging / "info.json").write_text(json.dumps({"spec": attrs.asdict(spec), **report}))

    return cached_build("tool_use", spec.cache_key(), build)


def tool_use_preset(root: Path) -> dict[str, Any]:
    """The run settings of the task (merged under the user's config by ``--task tool_use``)."""
    model = str(root / "model")
    return {
        "data": {
            "train_files": [str(root / "train.jsonl")],
            "val_files": [str(root / "val.jsonl")],
            "batch_size": 16,
            "max_prompt_length": 24,  # the rollout's context: 24 + 24 (the budget)
        },
        "trainer": {"total_steps": 30},
        "actor": {
            "model_path": model,
            "optim": {"lr": 1e-3},
            "mini_batch_size": 32,
            "micro_batch_size": 64,
        },
        "reference": {"forward_micro_batch_size": 64},
        "reward": {"functions": [{"name": "tool_use"}]},
        "rollout": {
            "max_response_length": 16,
            "multi_turn": {
                "tools": ["add"],
                "parser": "hermes",
                "renderer": "plain",
                "max_turns": 2,
                "max_response_tokens": 24,
            },
        },
    }
