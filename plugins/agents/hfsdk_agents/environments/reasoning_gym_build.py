"""Build the ``reasoning_gym`` task's data, tokenizer and warm-started model once (cached).

The data are ``basic_arithmetic`` questions with two one-digit terms and ``+``/``-``
(:data:`RG_CONFIG`), written by :func:`write_reasoning_gym_data`. The warm start
fits a tiny Llama, by soft labels, to answer ``<answer> N </answer> </s>`` with the
right ``N`` with probability ``p_right`` and any other answer of the task
otherwise: a model whose verifier scores are a mix of 1s, 0s and partial credit.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs

from hfsdk_agents.environments.reasoning_gym_data import write_reasoning_gym_data

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
BUILDER_VERSION = 1


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
    warm_start_steps: int = 120
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


def build_model(spec: ReasoningGymSpec, rows: list[dict[str, Any]], words: list[str]) -> Any:
    """(tokenizer, warm-started model) for ``rows`` (``words``: every word of the data)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from hfsdk_tasks.tokenizer import word_level_tokenizer

    tokenizer = word_level_tokenizer(words, max_length=64, cleanup=False)
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
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            model = LlamaForCausalLM(config)
            optimizer = torch.optim.AdamW(model.parameters(), lr=spec.warm_start_lr)
            model.train()
            for _ in range(spec.warm_start_steps):
                log_probs = torch.log_softmax(model(input_ids=ids_t).logits, dim=-1)
                per_token = -(target_t * log_probs).sum(dim=-1)
                loss = (per_token * weight_t).sum() / weight_t.sum()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            model.eval()
    finally:
        torch.set_num_threads(threads)
    return tokenizer, model


def ensure_reasoning_gym_assets(spec: ReasoningGymSpec | None = None) -> Path:
    """The cached build directory (``model/``, ``train.jsonl``, ``val.jsonl``), built once."""
    from hfsdk import cache_root

    spec = spec or ReasoningGymSpec()
    base = cache_root() / "reasoning_gym"
    final = base / spec.cache_key()
    if (final / "info.json").exists():
        return final
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.building-", dir=base))
    try:
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
        # The vocabulary covers every prompt and every answer the task can have.
        words = [r["prompt"] for r in every] + [
            f"{ANSWER_OPEN} {n} {ANSWER_CLOSE}" for n in range(-9, 19)
        ]
        tokenizer, model = build_model(spec, rows, words)
        model.save_pretrained(str(staging / "model"))
        tokenizer.save_pretrained(str(staging / "model"))
        (staging / "info.json").write_text(json.dumps({"spec": attrs.asdict(spec)}))
        try:
            os.rename(staging, final)
        except OSError:
            if not (final / "info.json").exists():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final
