"""What the agents plugin's built-in tasks share to build their tiny warm-started models.

Each task (``tool_use``, ``frozen_lake``, ``reasoning_gym``) writes its own data and
target distributions; the Llama config, the supervised fit to those distributions
and the cached, atomically renamed build directory are the same for all of them.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)


class WarmStartSpec(Protocol):
    """The fields of a task spec the shared warm start reads."""

    seed: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    warm_start_lr: float
    warm_start_steps: int


def tiny_llama_config(spec: WarmStartSpec, tokenizer: Any, *, max_positions: int) -> Any:
    """A ``LlamaConfig`` of the spec's shape over ``tokenizer``'s vocabulary (untied)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )


def fit_token_distributions(
    spec: WarmStartSpec,
    config: Any,
    ids: Any,
    targets: Any,
    weights: Any,
    *,
    batch_rows: int | None = None,
) -> tuple[Any, float]:
    """A model from ``config`` fitted to per-position target distributions; (model, last loss).

    The loss is the weighted cross-entropy of the model's next-token distribution
    against ``targets`` (rows × positions × vocabulary). Each step takes
    ``batch_rows`` rows drawn with the spec's seed, or every row (``None``). Runs on
    one thread with torch's global generator untouched, so a build is the same
    whatever the caller's thread count and random state.
    """
    import torch
    from transformers import LlamaForCausalLM

    from hfsdk import seeded_rng

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with seeded_rng(spec.seed):
            model = LlamaForCausalLM(config)
            optimizer = torch.optim.AdamW(model.parameters(), lr=spec.warm_start_lr)
            generator = torch.Generator().manual_seed(spec.seed)
            model.train()
            loss = torch.zeros(())
            for _ in range(spec.warm_start_steps):
                if batch_rows is None:
                    batch, target, weight = ids, targets, weights
                else:
                    pick = torch.randint(0, len(ids), (batch_rows,), generator=generator)
                    batch, target, weight = ids[pick], targets[pick], weights[pick]
                log_probs = torch.log_softmax(model(input_ids=batch).logits, dim=-1)
                per_token = -(target * log_probs).sum(dim=-1)
                loss = (per_token * weight).sum() / weight.sum()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            model.eval()
    finally:
        torch.set_num_threads(threads)
    return model, float(loss.detach())


BUILD_FILES = (
    "info.json",
    "model/config.json",
    "model/model.safetensors",
    "model/tokenizer.json",
    "train.jsonl",
    "val.jsonl",
)
"""The files every built-in agent task's build writes (a build without one is damaged)."""


def cached_build(
    kind: str,
    key: str,
    build: Callable[[Path], None],
    *,
    required: Sequence[str] = BUILD_FILES,
) -> Path:
    """``cache_root()/kind/key``, made once by ``build(staging)`` (which writes ``info.json``
    last) and renamed into place (:func:`hfsdk_tasks.build_once`).

    A directory there that lacks any of ``required`` is removed and rebuilt.
    """
    from hfsdk import cache_root
    from hfsdk_tasks import build_once

    final = cache_root() / kind / key

    def complete(directory: Path) -> bool:
        return all((directory / name).is_file() for name in required)

    if final.exists() and not complete(final):
        # Only a finished build is renamed into place, so a missing file was deleted
        # afterwards; the rename below cannot replace a non-empty directory, so remove it.
        log.warning("%s cache %s is incomplete; rebuilding it", kind, final)
        shutil.rmtree(final, ignore_errors=True)
    return build_once(final, build, complete=complete)
