"""Tiny random Hugging Face models and the transformers-only references engine tests compare
against (greedy responses, sequence scores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from hfsdk import Batch


def save_tiny_llama(
    directory: Path,
    tokenizer: Any,
    *,
    hidden_size: int,
    intermediate_size: int,
    num_heads: int,
    num_kv_heads: int,
    num_layers: int = 2,
    extra_vocab: int = 0,
    tied: bool = False,
    init_std: float | None = None,
    seed: int = 0,
) -> Path:
    """Save a randomly initialised HF Llama and ``tokenizer`` to ``directory``; return it.

    ``extra_vocab`` rows beyond the tokenizer's make an odd vocabulary (which
    tensor-parallel engines pad); ``init_std`` redraws every matrix from
    N(0, init_std²), which peaks the logits so greedy decoding has no near-ties.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer) + extra_vocab,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    if init_std is not None:
        with torch.no_grad():
            for param in model.parameters():
                if param.dim() == 2:
                    param.normal_(0.0, init_std)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def tokenizer_only_dir(directory: Path) -> Path:
    """A copy of the default task's tokenizer directory at ``directory``: tokenizer files, no
    config.json (what ``tokenizer.save_pretrained`` alone writes)."""
    import shutil

    from hfsdk import default_task_assets

    shutil.copytree(default_task_assets().tokenizer_dir, directory)
    assert not (directory / "config.json").exists()
    return directory


def hf_greedy_responses(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    width: int,
    eos: int,
    pad: int,
) -> torch.Tensor:
    """HF greedy ``generate``'s responses as a rollout returns them: ``width`` columns,
    padding after each row's first EOS (the reference for rollout-engine tests)."""
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=width,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=pad,
        )[:, input_ids.shape[1] :]
    padded = torch.full((len(out), width), pad, dtype=torch.long)
    padded[:, : out.shape[1]] = out
    for row in padded:
        hits = (row == eos).nonzero()
        if len(hits):
            row[hits[0, 0] + 1 :] = pad
    return padded


def hf_sequence_scores(model_dir: Any, batch: Batch) -> torch.Tensor:
    """Each row's score by transformers alone (``AutoModelForSequenceClassification`` from
    ``model_dir``): its head at the row's last response token, one row at a time, with no
    padding — the reference for score-model (reward, cost) tests. ``batch`` has
    ``prompts`` (left-padded), ``responses``, ``attention_mask`` and ``response_mask``."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    prompt_width = batch["prompts"].shape[1]
    scores = []
    for row in range(len(batch)):
        prompt = batch["prompts"][row][batch["attention_mask"][row, :prompt_width] == 1]
        length = int(batch["response_mask"][row].sum())
        ids = torch.cat([prompt, batch["responses"][row, :length]])[None]
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        scores.append(float(logits[0, 0]) if logits.dim() == 2 else float(logits[0, -1, 0]))
    return torch.tensor(scores)
