"""Generation throughput: the vLLM rollout engine against HF ``generate``, on a ~30M Llama.

    .venv/bin/python benchmarks/rollout.py [--batches 32 128] [--new-tokens 64] [--repeats 3]

Both engines decode the same prompts (the default task's, 5 tokens each)
with the same model: a Llama of about 29M parameters (hidden 512, 9 layers,
8 heads of 64, MLP 1408, the default task's 26-token vocabulary), randomly
initialised and built locally (nothing is downloaded). Every sequence
samples exactly ``--new-tokens`` tokens (temperature 1, EOS ignored: vLLM
``ignore_eos``, HF ``min_new_tokens``), so both produce batch × new-tokens
tokens per call.

- HF: ``model.generate`` with the KV cache, all sequences of a batch in one
  call, in float32 — what the ``hf`` rollout does on the actor's module.
- vLLM: the ``vllm`` rollout's engine (:class:`ColocatedEngine`: vLLM in this
  process, eager mode, float32, 1 GiB CPU KV cache), one ``generate`` call per
  batch. vLLM's first call compiles a small sampler kernel; one warm-up call
  per engine is not timed.

tokens/s = generated tokens / wall time of the call; the table shows the
median over ``--repeats`` calls. Threads: whatever ``OMP_NUM_THREADS`` /
torch's default give this process (the same for both engines).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch

PROMPTS = ["3 + 4 =", "1 + 2 =", "9 + 9 =", "0 + 7 =", "5 + 5 =", "8 + 1 =", "2 + 6 =", "4 + 4 ="]


def build_model(directory: Path) -> int:
    """Save the ~29M-parameter Llama (and the task's tokenizer) to ``directory``; its size."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from hfsdk_tasks import ensure_default_assets
    from hfsdk_tasks.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(ensure_default_assets().model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=512,
        intermediate_size=1408,
        num_hidden_layers=9,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return sum(p.numel() for p in model.parameters())


def prompt_ids(model_dir: Path, batch: int) -> list[list[int]]:
    """``batch`` tokenized prompts (the default task's, cycled)."""
    from hfsdk_tasks.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    return [tokenizer(PROMPTS[i % len(PROMPTS)])["input_ids"] for i in range(batch)]


def time_hf(model_dir: Path, batches: Sequence[int], new_tokens: int, repeats: int) -> dict:
    """Median tokens/s of HF ``generate`` per batch size."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    results = {}
    for batch in batches:
        ids = torch.tensor(prompt_ids(model_dir, batch))  # equal lengths: no padding needed
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=new_tokens,
                    min_new_tokens=new_tokens,
                    use_cache=True,
                )
            elapsed = time.perf_counter() - start
            generated = (out.shape[1] - ids.shape[1]) * batch
            rates.append(generated / elapsed)
            print(f"hf {batch}: {generated} tokens in {elapsed:.2f} s", file=sys.stderr, flush=True)
        results[batch] = statistics.median(rates)
    return results


def time_vllm(model_dir: Path, batches: Sequence[int], new_tokens: int, repeats: int) -> dict:
    """Median tokens/s of the vllm rollout's engine per batch size."""
    from vllm import SamplingParams

    from hfsdk_rollout_vllm.engine import ColocatedEngine
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

    config = VLLMRolloutConfig(
        max_prompt_length=16, max_response_length=new_tokens, max_num_seqs=max(batches)
    )
    engine = ColocatedEngine(config, model_dir, torch.float32, on_cpu=True)
    params = SamplingParams(temperature=1.0, max_tokens=new_tokens, ignore_eos=True, logprobs=0)
    engine.generate([{"prompt_token_ids": prompt_ids(model_dir, 1)[0]}], [params])  # warm-up
    results = {}
    for batch in batches:
        requests = [{"prompt_token_ids": ids} for ids in prompt_ids(model_dir, batch)]
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            outputs = engine.generate(requests, [params] * batch)
            elapsed = time.perf_counter() - start
            generated = sum(len(o.outputs[0].token_ids) for o in outputs)
            rates.append(generated / elapsed)
            print(
                f"vllm {batch}: {generated} tokens in {elapsed:.2f} s", file=sys.stderr, flush=True
            )
        results[batch] = statistics.median(rates)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """Time both engines and print a markdown table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--batches", type=int, nargs="+", default=[32, 128])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hfsdk_rollout_bench_") as tmp:
        model_dir = Path(tmp) / "llama29m"
        params = build_model(model_dir)
        hf = time_hf(model_dir, args.batches, args.new_tokens, args.repeats)
        vllm = time_vllm(model_dir, args.batches, args.new_tokens, args.repeats)
    threads = os.environ.get("OMP_NUM_THREADS", f"default ({torch.get_num_threads()})")
    print(f"\nLlama {params / 1e6:.1f}M parameters, float32, CPU, {args.new_tokens} new tokens "
          f"per sequence, OMP_NUM_THREADS={threads}, median of {args.repeats}\n")  # fmt: skip
    print("| sequences | HF generate tokens/s | vLLM tokens/s | vLLM / HF |")
    print("|---:|---:|---:|---:|")
    for batch in args.batches:
        print(f"| {batch} | {hf[batch]:.0f} | {vllm[batch]:.0f} | {vllm[batch] / hf[batch]:.2f} |")


if __name__ == "__main__":
    main()
