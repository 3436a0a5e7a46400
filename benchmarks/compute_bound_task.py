"""The compute-bound benchmark task: a ~30M-parameter Llama that answers at full length.

``vs_trl.py --task compute`` trains on it: the default task's prompts and
reward, but a model big enough that the matrix multiplications, not the
framework, dominate a step (8 layers, hidden 512, 8 heads, MLP 1376, a
4,096-word vocabulary, about 29.5M parameters). The model is freshly
initialised (seed 0): it almost never samples EOS (1 word in 4,096), so every
response runs to the length limit and both frameworks process the same
number of tokens per step. Everything is built locally, offline, in a few
seconds, and cached under the given directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

MODEL_SETTINGS = {
    "vocab_size": 4096,
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
}
SPECIAL = ("<pad>", "<s>", "</s>", "<unk>")


def vocabulary(train_jsonl: Path, size: int) -> list[str]:
    """Special tokens, every word of the task's prompts and answers, then filler words."""
    words: list[str] = list(SPECIAL)
    seen = set(words)
    for line in train_jsonl.read_text().splitlines():
        row = json.loads(line)
        for word in f"{row['prompt']} {row['answer']} ugh".split():
            if word not in seen:
                seen.add(word)
                words.append(word)
    for i in range(size):
        if len(words) >= size:
            break
        words.append(f"w{i}")
    return words


def build_tokenizer(words: list[str]) -> Any:
    """A word-level fast tokenizer over ``words`` that puts ``<s>`` in front, like Llama's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", vocab["<s>"])]
    )
    tokenizer.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=MODEL_SETTINGS["max_position_embeddings"],
    )


def ensure_compute_bound_assets(
    root: Path, vocab_size: int = MODEL_SETTINGS["vocab_size"]
) -> tuple[Path, Path]:
    """``(model_dir, train_jsonl)`` of the task under ``root`` (built once, atomically).

    A smaller ``vocab_size`` (at least the task's own words) makes EOS one of
    few words, so the fresh model ends its responses at widely varying lengths.
    """
    from hfsdk_tasks import ensure_default_assets

    model_dir, train_jsonl = root / "model", root / "train.jsonl"
    if (model_dir / "model.safetensors").exists() and train_jsonl.exists():
        return model_dir, train_jsonl
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    source = ensure_default_assets().train_jsonl
    staging = root.with_name(root.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    words = vocabulary(source, vocab_size)
    tokenizer = build_tokenizer(words)
    ids = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    torch.manual_seed(0)
    settings = {**MODEL_SETTINGS, "vocab_size": len(words)}
    model = LlamaForCausalLM(LlamaConfig(**settings, **ids))
    model.generation_config = GenerationConfig(**ids)
    model.save_pretrained(str(staging / "model"))
    tokenizer.save_pretrained(str(staging / "model"))
    shutil.copyfile(source, staging / "train.jsonl")
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return model_dir, train_jsonl


def parameter_count(model_dir: Path) -> int:
    """Parameters of the built model (read from its config, no weights loaded)."""
    s = json.loads((model_dir / "config.json").read_text())
    h, i, v, n = s["hidden_size"], s["intermediate_size"], s["vocab_size"], s["num_hidden_layers"]
    per_layer = 4 * h * h + 3 * h * i + 2 * h
    return n * per_layer + 2 * v * h + h
