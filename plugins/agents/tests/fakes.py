"""A scripted rollout backend and a tiny tokenizer for agent-loop tests (no model)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import torch

from hfsdk import Batch, DataParallelInfo, RolloutBackend, RolloutConfig
from hfsdk_agents.config import MultiTurnConfig


def word_tokenizer(words: Sequence[str], *, fuse: bool = False, template: str | None = None) -> Any:
    """A word-level tokenizer over ``words`` (``fuse``: decoding joins without spaces)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {w: i for i, w in enumerate([*specials, *dict.fromkeys(words)])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.Fuse() if fuse else decoders.WordPiece(cleanup=False)
    out = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
    )
    if template is not None:
        out.chat_template = template
    return out


@attrs.define
class FakeActor:
    """Just what the agent runner reads from an actor."""

    tokenizer: Any
    generation_eos_ids: list[int] = attrs.field(factory=list)
    dp: DataParallelInfo = attrs.field(factory=DataParallelInfo)


Script = Callable[[list[int]], list[int]]
"""context ids -> the ids the fake model produces (before cutting at a stop)."""


class ScriptedRollout(RolloutBackend):
    """Answers each row with ``script(context)``, log-prob ``-0.1 * (position + 1)`` per token."""

    def __init__(self, config: RolloutConfig, actor: Any, script: Script, width: int = 16):
        super().__init__(config, actor)
        self.script = script
        self.width = width
        self.contexts: list[list[int]] = []
        self.calls = 0

    def generate_sequences(self, prompts: Batch) -> Batch:
        self.calls += 1
        pad = self.actor.tokenizer.pad_token_id
        rows = len(prompts)
        responses = torch.full((rows, self.width), pad, dtype=torch.long)
        mask = torch.zeros((rows, self.width))
        for row in range(rows):
            context = prompts["input_ids"][row][prompts["attention_mask"][row].bool()].tolist()
            self.contexts.append(context)
            out = self.script(context)[: self.width]
            responses[row, : len(out)] = torch.tensor(out, dtype=torch.long)
            mask[row, : len(out)] = 1.0
        log_probs = -0.1 * torch.arange(1, self.width + 1).float().expand(rows, -1) * mask
        return Batch.from_dict(
            tensors={
                "responses": responses,
                "response_mask": mask,
                "rollout_log_probs": log_probs,
            },
            meta={"rollout_metrics": {}},
        )


def rollout_for(
    tokenizer: Any, script: Script, width: int = 16, **multi_turn: Any
) -> ScriptedRollout:
    """A scripted rollout whose config has ``multi_turn`` settings."""
    config = RolloutConfig(
        backend="scripted", subsections={"multi_turn": MultiTurnConfig(**multi_turn)}
    )
    return ScriptedRollout(config, FakeActor(tokenizer=tokenizer), script, width)


def prompt_batch(tokenizer: Any, texts: Sequence[str], **meta: Any) -> Batch:
    """Left-padded prompts with ``raw_prompt``."""
    encoded = [tokenizer.encode(t) for t in texts]
    width = max(len(e) for e in encoded)
    ids = torch.full((len(texts), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(texts), width), dtype=torch.long)
    for row, e in enumerate(encoded):
        ids[row, width - len(e) :] = torch.tensor(e)
        mask[row, width - len(e) :] = 1
    return Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": mask},
        non_tensors={"raw_prompt": list(texts)},
        meta={"n": 1, **meta},
    )
