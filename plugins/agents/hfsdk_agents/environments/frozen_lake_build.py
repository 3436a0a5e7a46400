"""Build the ``frozen_lake`` task's tokenizer, warm-started model and data once (cached).

The warm start fits the tiny Llama, by soft labels, to a policy that ignores the
board: at the start of each turn ``<tool_call>`` with ``p_call`` (else ``</s>``),
the call's fixed words with certainty and a direction from ``direction_probs``
(a mild lean toward down and right, where the goal is). The contexts it learns
on are episodes that policy walked in gymnasium's own FrozenLake. So the model
writes well-formed ``move`` calls but walks at random: it reaches the goal in
about one episode in seven, and GRPO has something to raise.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import attrs

from hfsdk_agents.environments.frozen_lake import ACTIONS, FrozenLake
from hfsdk_agents.environments.frozen_lake_task import (
    MAX_MOVES,
    PROMPT,
    RESPONSE_CLOSE,
    RESPONSE_OPEN,
    call_words,
    corpus,
    task_rows,
)
from hfsdk_agents.warm_start import cached_build, fit_token_distributions, tiny_llama_config

BUILDER_VERSION = 1


@attrs.frozen(kw_only=True)
class FrozenLakeSpec:
    """The warm-start policy, its data and the model shape."""

    p_call: float = 0.97
    direction_probs: tuple[float, float, float, float] = (0.15, 0.35, 0.35, 0.15)
    """left, down, right, up (gymnasium's action order)."""
    episodes: int = 512
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 128
    warm_start_steps: int = 150
    warm_start_lr: float = 3e-3
    batch_rows: int = 64
    train_rows: int = 64
    val_rows: int = 16
    seed: int = 0

    def cache_key(self) -> str:
        """A short hash of the spec and the builder version."""
        import hashlib

        text = json.dumps({"spec": attrs.asdict(self), "v": BUILDER_VERSION}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def train_tokenizer() -> Any:
    """The word-level tokenizer (one token per word, no clean-up: the JSON stays as written)."""
    from hfsdk_tasks.tokenizer import word_level_tokenizer

    return word_level_tokenizer(corpus(), max_length=128, cleanup=False)


def _episode(spec: FrozenLakeSpec, tokenizer: Any, rng: random.Random) -> tuple[Any, Any, Any]:
    """One walk of the warm-start policy: (ids, soft targets, weights) for the model's turns."""
    import torch

    vocab = len(tokenizer)
    tid = tokenizer.convert_tokens_to_ids
    directions = list(ACTIONS)
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    env = FrozenLake()
    ids = list(tokenizer(PROMPT).input_ids) + encode(" " + env.reset({}))
    targets: list[tuple[int, Any]] = []  # (position predicting the token, distribution)

    def one(token: str) -> Any:
        t = torch.zeros(vocab)
        t[tid(token)] = 1.0
        return t

    for _ in range(MAX_MOVES):
        start = torch.zeros(vocab)
        start[tid(call_words("down")[0])] = spec.p_call
        start[tokenizer.eos_token_id] = 1.0 - spec.p_call
        targets.append((len(ids) - 1, start))
        direction = rng.choices(directions, weights=spec.direction_probs)[0]
        words = call_words(direction)
        for k, word in enumerate(words[1:], start=1):
            if word.startswith('"') and word.endswith('"}}'):  # the direction word
                t = torch.zeros(vocab)
                for d, p in zip(directions, spec.direction_probs, strict=True):
                    t[tid(call_words(d)[k])] = p
            else:
                t = one(word)
            targets.append((len(ids) + k - 1, t))
        ids += [tid(w) for w in words]
        observation = env.move(direction)
        ids += encode(f" {RESPONSE_OPEN} {observation} {RESPONSE_CLOSE}")
        if env.done:
            break
    env.close()
    target = torch.zeros(len(ids), vocab)
    weight = torch.zeros(len(ids))
    for pos, dist in targets:
        target[pos], weight[pos] = dist, 1.0
    return ids, target, weight


def build_model(spec: FrozenLakeSpec, tokenizer: Any) -> tuple[Any, dict[str, float]]:
    """The warm-started tiny Llama and what the warm start measured."""
    import torch

    started = time.perf_counter()
    rng = random.Random(spec.seed)
    episodes = [_episode(spec, tokenizer, rng) for _ in range(spec.episodes)]
    width = max(len(ids) for ids, _, _ in episodes)
    vocab = len(tokenizer)
    ids = torch.full((len(episodes), width), tokenizer.pad_token_id, dtype=torch.long)
    targets = torch.zeros(len(episodes), width, vocab)
    weights = torch.zeros(len(episodes), width)
    for row, (seq, target, weight) in enumerate(episodes):
        ids[row, : len(seq)] = torch.tensor(seq)
        targets[row, : len(seq)] = target
        weights[row, : len(seq)] = weight
    config = tiny_llama_config(spec, tokenizer, max_positions=128)
    model, loss = fit_token_distributions(
        spec, config, ids, targets, weights, batch_rows=spec.batch_rows
    )
    return model, {"final_loss": loss, "seconds": time.perf_counter() - started}


def ensure_frozen_lake_assets(spec: FrozenLakeSpec | None = None) -> Path:
    """The cached build directory (``model/``, ``train.jsonl``, ``val.jsonl``), built once."""
    spec = spec or FrozenLakeSpec()

    def build(staging: Path) -> None:
        tokenizer = train_tokenizer()
        model, report = build_model(spec, tokenizer)
        model.save_pretrained(str(staging / "model"))
        tokenizer.save_pretrained(str(staging / "model"))
        for name, count in (("train.jsonl", spec.train_rows), ("val.jsonl", spec.val_rows)):
            (staging / name).write_text("".join(json.dumps(r) + "\n" for r in task_rows(count)))
        (staging / "info.json").write_text(json.dumps({"spec": attrs.asdict(spec), **report}))

    return cached_build("frozen_lake", spec.cache_key(), build)
