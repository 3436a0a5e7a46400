"""Build the ``reasoning_gym`` task's data, tokenizer and warm-started model once (cached).

The data are ``basic_arithmetic`` questions with two one-digit terms and ``+``/``-``
(:data:`RG_CONFIG`), written by :func:`write_reasoning_gym_data`. The warm start
fits a tiny Llama, by soft labels, to answer ``<answer> N </answer> </s>`` with the
right ``N`` with probability ``p_right`` and any other answer of the task
otherwise: a model whose verifier scores are a mix of 1s, 0s and partial credit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HfsdkError
from hfsdk_agents.environments.reasoning_gym_data import write_reasoning_gym_data
from hfsdk_agents.warm_start import cached_build, fit_token_distributions, tiny_llama_config

RG_TASK = "basic_arithmetic"
RG_CONFIG: dict[str, Any] = {
    "min_terms": 2,
    "max_terms": 2,
    "min_digits": 1,
    "max_digits": 1,
    "operators": ["+", "-"],
    "allow_parentheses": False,
    "allow_negation": False,
}
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
# 2: validation rows no longer repeat training rows; 3: every row's answer is in the
# vocabulary, and info.json records the measured P(right)
BUILDER_VERSION = 3


@attrs.frozen(kw_only=True)
class ReasoningGymSpec:
    """The data's size, the warm-start policy and the model shape."""

    train_size: int = 256
    val_size: int = 32
    seed: int = 0
    p_right: float = 0.3
    hidden_size: int = 32
    num_layers: int = 1
    num_heads: int = 2
    intermediate_size: int = 64
    # 120 steps left the model near uniform (P(right) 0.07); 480 reach 0.29 of p_right 0.3.
    warm_start_steps: int = 480
    warm_start_lr: float = 5e-3

    def cache_key(self) -> str:
        """A short hash of the spec, the task and the builder version."""
        import hashlib

        text = json.dumps(
            {"spec": attrs.asdict(self), "task": [RG_TASK, RG_CONFIG], "v": BUILDER_VERSION},
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_answers_known(tokenizer: Any, rows: list[dict[str, Any]]) -> None:
    """Refuse a build whose vocabulary lacks a row's answer: that row could never score 1,
    and the warm start would train ``<unk>`` as its right answer."""
    tid, unk = tokenizer.convert_tokens_to_ids, tokenizer.unk_token_id
    unknown = sorted({r["answer"] for r in rows if tid(r["answer"]) == unk})
    if unknown:
        raise HfsdkError(
            f"the reasoning_gym build's vocabulary lacks the answers {unknown}; expected every "
            "row's answer among the tokenizer's words (a builder bug: report it)"
        )


def mean_p_right(tokenizer: Any, model: Any, rows: list[dict[str, Any]]) -> float:
    """The mean probability the model gives each row's answer right after ``<answer>``."""
    import torch

    tid = tokenizer.convert_tokens_to_ids
    seqs = [[*tokenizer(r["prompt"]).input_ids, tid(ANSWER_OPEN)] for r in rows]
    # One batch, padded on the right: a causal model's earlier positions never see the pads.
    ids = torch.full((len(seqs), max(map(len, seqs))), tokenizer.pad_token_id, dtype=torch.long)
    for i, seq in enumerate(seqs):
        ids[i, : len(seq)] = torch.tensor(seq)
    last = torch.tensor([len(seq) - 1 for seq in seqs])
    with torch.no_grad():
        probs = model(input_ids=ids).logits[torch.arange(len(seqs)), last].softmax(-1)
    right = probs[torch.arange(len(seqs)), torch.tensor(tid([r["answer"] for r in rows]))]
    return float(right.mean())


def build_model(spec: ReasoningGymSpec, rows: list[dict[str, Any]], words: list[str]) -> Any:
    """(tokenizer, warm-started model) for ``rows`` (``words``: every word of the data)."""
    import torch

    from hfsdk_tasks.tokenizer import word_level_tokenizer

    tokenizer = word_level_tokenizer(words, max_length=64, cleanup=False)
    check_answers_known(tokenizer, rows)
    tid = tokenizer.convert_tokens_to_ids
    answers = sorted({r["answer"] for r in rows}, key=int)
    answer_ids = torch.tensor(tid(answers))
    vocab = len(tokenizer)
    seqs, targets, weights = [], [], []
    for row in rows:
        prompt = tokenizer(row["prompt"]).input_ids
        ids = [*prompt, tid(ANSWER_OPEN), tid(row["answer"]), tid(ANSWER_CLOSE)]
        target = torch.zeros(len(ids) + 1, vocab)
        first = len(prompt) - 1
        target[first, tid(ANSWER_OPEN)] = 1.0
        target[first + 1, answer_ids] = (1.0 - spec.p_right) / len(answers)
        target[first + 1, tid(row["answer"])] += spec.p_right
        target[first + 2, tid(ANSWER_CLOSE)] = 1.0
        target[first + 3, tokenizer.eos_token_id] = 1.0
        weight = torch.zeros(len(ids) + 1)
        weight[first : first + 4] = 1.0
        seqs.append([*ids, tokenizer.eos_token_id])
        targets.append(target)
        weights.append(weight)
    width = max(len(s) for s in seqs)
    ids_t = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
    target_t = torch.zeros(len(seqs), width, vocab)
    weight_t = torch.zeros(len(seqs), width)
    for i, (s, t, w) in enumerate(zip(seqs, targets, weights, strict=True)):
        ids_t[i, : len(s)], target_t[i, : len(s)], weight_t[i, : len(s)] = torch.tensor(s), t, w
    config = tiny_llama_config(spec, tokenizer, max_positions=64)
    model, _ = fit_token_distributions(spec, config, ids_t, target_t, weight_t)
    return tokenizer, model


def ensure_reasoning_gym_assets(spec: ReasoningGymSpec | None = None) -> Path:
    """The cached build directory (``model/``, ``train.jsonl``, ``val.jsonl``), built once."""
    spec = spec or ReasoningGymSpec()

    def build(staging: Path) -> None:
        train, val = write_reasoning_gym_data(
            RG_TASK,
            staging,
            train_size=spec.train_size,
            val_size=spec.val_size,
            seed=spec.seed,
            config=RG_CONFIG,
        )
        rows = _read(train)
        every = [*rows, *_read(val)]
        # The vocabulary covers every prompt and every answer the task can have. The range
        # alone is not enough: basic_arithmetic draws the operand 10 even with max_digits=1
        # (answers 19, 20, -10), so every row's own answer is a word too.
        answers = {str(n) for n in range(-9, 19)} | {r["answer"] for r in every}
        words = [r["prompt"] for r in every] + [
            f"{ANSWER_OPEN} {a} {ANSWER_CLOSE}" for a in sorted(answers, key=int)
        ]
        tokenizer, model = build_model(spec, rows, words)
        check_answers_known(tokenizer, every)  # the validation rows' answers as well
        model.save_pretrained(str(staging / "model"))
        tokenizer.save_pretrained(str(staging / "model"))
        # What the warm start reached, so a fit too weak for the docs' "about 30 %" shows.
        measured = {
            "p_right_train": mean_p_right(tokenizer, model, rows),
            "p_right_val": mean_p_right(tokenizer, model, _read(val)),
        }
        (staging / "info.json").write_text(json.dumps({"spec": attrs.asdict(spec), **measured}))

    return cached_build("reasoning_gym", spec.cache_key(), build)
