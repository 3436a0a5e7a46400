"""vLLM weight reload from a megatron actor at tp=2: 3D-HybridEngine stream vs full gather.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/megatron_vllm.py            # ~26M params
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/megatron_vllm.py --layers 2 # quicker

Two gloo ranks hold a megatron-core actor at tp=2 (a randomly initialised
Llama, hidden 512, 8 heads of 64, the default task's tokenizer). For each
rollout tp (tg = 1: a vLLM engine per rank; tg = 2: one vLLM engine over both
ranks) the benchmark reloads the engine:

(a) ``stream``: :class:`HybridVLLMRollout`'s path — the micro-DP transition
    streamed one weight at a time into vLLM's in-place reload (at tg = 2 each
    weight is all-gathered over the 2 ranks, because vLLM's loaders cut their
    own slice);
(b) ``full gather``: the megatron engine's ``full_hf_state()`` (every rank
    assembles the whole HF state dict), then the same in-place reload.

Per scheme: seconds of the reload (median of ``--repeats``, max over ranks),
bytes received per rank and extra memory held by the transition beyond the
training shard (the largest weight in flight for (a), the whole model for
(b)). Then greedy generation throughput of the engine (tokens/s, both ranks'
prompts). gloo on a shared 2-core machine: seconds are indicative.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

MB = 2**20


def build_model(directory: Path, layers: int) -> Path:
    """A random 512-wide Llama of ``layers`` layers with the default task's tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from hfsdk_tasks import ensure_default_assets

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(ensure_default_assets().model_dir))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=512,
        intermediate_size=1408,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def rank_main(
    rank: int, world: int, path: str, tg: int, repeats: int, prompts: int, tokens: int
) -> dict[str, Any]:
    """One rank: build the actor and the rollout, time both reloads and a greedy generation."""
    import torch.distributed as dist

    from hfsdk import Batch
    from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig
    from hfsdk_rollout_vllm.hybrid_vllm import HybridVLLMRollout
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
    from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout

    config = MegatronRoleConfig(
        model_path=path,
        device="cpu",
        parallel=ParallelConfig(tp=2),
        rollout_layout=RolloutLayoutConfig(tp=tg),
    )
    engine = MegatronEngine(config, role="actor", kind="actor")
    rollout = VLLMRollout.build(
        VLLMRolloutConfig(max_prompt_length=16, max_response_length=tokens, temperature=1.0),
        engine,
    )
    assert isinstance(rollout, HybridVLLMRollout)
    stream, full = [], []
    for _ in range(repeats):
        dist.barrier()
        started = time.perf_counter()
        metrics = rollout.reload_weights()
        stream.append(time.perf_counter() - started)
        dist.barrier()
        started = time.perf_counter()
        state = engine.full_hf_state()
        rollout.vllm.reload_weights(state.items())
        full.append(time.perf_counter() - started)
        full_bytes = sum(t.numel() * t.element_size() for t in state.values())
        del state
    own = sum(p.numel() * p.element_size() for p in engine.model.parameters())
    ids = torch.randint(3, 20, (prompts, 8))
    batch = Batch.from_dict(tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    dist.barrier()
    started = time.perf_counter()
    out = rollout.generate_sequences(batch, greedy=True)
    seconds = time.perf_counter() - started
    return {
        "stream_s": statistics.median(stream),
        "stream_bytes": metrics["perf/reshard_bytes"] + metrics["perf/reshard_tp_gather_bytes"],
        "stream_peak": metrics["perf/reshard_peak_extra_bytes"],
        "full_s": statistics.median(full),
        "full_bytes": full_bytes - own,
        "full_peak": full_bytes,
        "tokens_per_s": float(out["response_mask"].sum()) / seconds,
        "params": sum(p.numel() for p in engine.model.parameters()) * 2,
    }


def main() -> None:
    """Run both rollout layouts and print the table."""
    from hfsdk_backend_common.testing.launch import run_gloo

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(Path(tmp) / "model", args.layers)
        rows = []
        for tg in (1, 2):
            kwargs = {
                "path": str(path),
                "tg": tg,
                "repeats": args.repeats,
                "prompts": args.prompts,
                "tokens": args.tokens,
            }
            here = [str(Path(__file__).parent)]
            ranks = run_gloo(2, "megatron_vllm:rank_main", kwargs, path=here)
            rows.append((tg, {k: max(r[k] for r in ranks) for k in ranks[0]}))
    params = rows[0][1]["params"] / 1e6
    print(f"megatron actor tp=2, {params:.1f}M parameters (float32), 2 gloo ranks")
    print(
        "| rollout tp | stream reload s | stream MB recv/rank | stream peak extra MB "
        "| full-gather reload s | full-gather MB recv/rank | full-gather extra MB | greedy tok/s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for tg, r in rows:
        print(
            f"| {tg} | {r['stream_s']:.2f} | {r['stream_bytes'] / MB:.1f} "
            f"| {r['stream_peak'] / MB:.1f} | {r['full_s']:.2f} | {r['full_bytes'] / MB:.1f} "
            f"| {r['full_peak'] / MB:.1f} | {r['tokens_per_s']:.0f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
