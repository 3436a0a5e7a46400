"""The GPU check's task: locally built models of Qwen2.5-0.5B's shape, prompts and a reward.

``scripts/gpu_check.py`` trains on it (hfsdk with both backends, and TRL).
Everything is built here, offline, from a config: no download.

Architecture: **Llama** with Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14
query heads, 2 key/value heads, MLP 4,864, a 151,936-word vocabulary, tied
input/output embeddings, RoPE base 10^6, RMSNorm eps 10^-6), randomly
initialised. Qwen2 itself differs only by biases on the query/key/value
projections; the hfsdk decoder decodes Llama models (no biases), and for a
Qwen2 model ``rollout.decoder: auto`` falls back to ``generate``, so a
Qwen2 model would not exercise the decoder this check is about. (A locally
saved Qwen2 tokenizer also reloads with other token ids; see
/work/shared/ARCHITECTURE.md.)

The tokenizer is word-level over the default task's words plus filler words
(``w0``, ``w1``, ...) up to the model's vocabulary size, so every token id
decodes to a word. A random model almost never samples EOS (1 word in
151,936), so every response runs to the length limit and both frameworks
process the same number of tokens. The prompts are the default task's
(single-digit additions). The reward, :func:`odd_length_share`, is the share
of response words of odd length: noisy but never constant within a group, so
GRPO's advantages (and so the updates) are not zero.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

QWEN25_05B_SHAPE = {
    "vocab_size": 151936,
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
"""Qwen2.5-0.5B's shape as a Llama config (about 494M parameters)."""

RESUME_SHAPE = {**QWEN25_05B_SHAPE, "num_hidden_layers": 4, "vocab_size": 32000}
"""The exact-resume runs' model: the same layer shape, 4 layers and a 32,000-word vocabulary
(about 88M parameters), so its six checkpoints stay small and quick to write."""

TINY_SHAPE = {
    **QWEN25_05B_SHAPE,
    "vocab_size": 2048,
    "hidden_size": 112,
    "intermediate_size": 608,
    "num_hidden_layers": 2,
    "num_attention_heads": 7,
    "num_key_value_heads": 1,
    "max_position_embeddings": 512,
}
"""The CPU mode's model: Qwen2.5-0.5B's ratios (7 query heads per key/value head, MLP 5.4x
hidden, tied embeddings) at hidden 112 (head dim 16), 2 layers, 2,048 words."""


def odd_length_share(prompts: list[str], completions: list[str], **_: Any) -> list[float]:
    """Per response, the share of its words that have an odd number of characters (0 if none).

    Called by hfsdk (``fn(prompts, responses, **columns)``) and by TRL
    (keyword arguments ``prompts``, ``completions`` and dataset columns).
    """
    out = []
    for text in completions:
        words = text.split()
        out.append(sum(len(w) % 2 for w in words) / len(words) if words else 0.0)
    return out


def build_model(root: Path, shape: dict[str, Any], train_jsonl: Path, *, seed: int = 0) -> Path:
    """A random Llama of ``shape`` with a tokenizer over ``train_jsonl``'s words plus fillers,
    saved under ``root`` (once, atomically)."""
    if (root / "config.json").exists() and any(root.glob("*.safetensors")):
        return root
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from compute_bound_task import build_tokenizer, vocabulary

    words = vocabulary(train_jsonl, shape["vocab_size"])
    tokenizer = build_tokenizer(words)
    tokenizer.model_max_length = shape["max_position_embeddings"]
    ids = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    staging = root.with_name(root.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**shape, **ids))
    model.generation_config = GenerationConfig(**ids)
    model.save_pretrained(str(staging))
    tokenizer.save_pretrained(str(staging))
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def train_prompts(root: Path) -> Path:
    """The default task's training prompts (``prompt`` and ``answer`` columns) as one jsonl.

    Written from the task's rows directly: the default task's own assets would
    also train its tokenizer and warm-start its model, which this check does not use.
    """
    from hfsdk_tasks import DefaultTaskSpec
    from hfsdk_tasks.task import task_rows

    target = root / "train.jsonl"
    if not target.exists():
        root.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(r) for r in task_rows(DefaultTaskSpec())]
        target.with_suffix(".tmp").write_text("\n".join(lines) + "\n")
        target.with_suffix(".tmp").rename(target)
    return target


def prompt_texts(train_jsonl: Path, count: int) -> list[str]:
    """The first ``count`` prompts of ``train_jsonl``."""
    rows = [json.loads(line) for line in train_jsonl.read_text().splitlines() if line]
    return [row["prompt"] for row in rows[:count]]


def parameter_count(model_dir: Path) -> int:
    """Parameters of a saved Llama (from its config; tied embeddings counted once)."""
    s = json.loads((model_dir / "config.json").read_text())
    h, i, v, n = s["hidden_size"], s["intermediate_size"], s["vocab_size"], s["num_hidden_layers"]
    head_dim = h // s["num_attention_heads"]
    kv = s["num_key_value_heads"] * head_dim
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h
    embeddings = v * h * (1 if s.get("tie_word_embeddings") else 2)
    return n * per_layer + embeddings + h
