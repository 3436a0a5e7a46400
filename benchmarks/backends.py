"""Training backends side by side: actor update tokens/s and peak memory per rank.

One ~30M-parameter Llama (built locally, random weights) and one fixed batch;
each layout runs in fresh processes over gloo (``torch.multiprocessing``),
does one warm-up ``update_actor`` and then ``--steps`` timed ones. Tokens/s
counts every token of the global batch (prompt + response) per timed update.
Peak memory is each rank's peak resident set size (``ru_maxrss``: the Python,
torch and library baseline included, so compare the differences).

    .venv/bin/python benchmarks/backends.py
    .venv/bin/python benchmarks/backends.py --layouts megatron:2x1 fsdp:2 --steps 2
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DEFAULT_LAYOUTS = (
    "fsdp:1",
    "fsdp:2",
    "megatron:1x1",
    "megatron:2x1",
    "megatron:1x2",
    "megatron:2x2",
)
ROWS, PROMPT, RESPONSE = 8, 64, 64


def build_model(directory: Path) -> int:
    """A ~30M-parameter Llama with the default task's tokenizer; returns the parameter count."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from hfsdk_tasks import ensure_default_assets

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(ensure_default_assets().tokenizer_dir))
    config = LlamaConfig(
        vocab_size=8192,
        hidden_size=512,
        intermediate_size=1408,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return sum(p.numel() for p in model.parameters())


def make_batch() -> dict[str, torch.Tensor]:
    """A fixed batch of ``ROWS`` prompt + response sequences."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 8192, (ROWS, PROMPT + RESPONSE), generator=generator)
    mask = torch.ones_like(ids)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "responses": ids[:, PROMPT:],
        "response_mask": mask[:, PROMPT:],
        "old_log_probs": torch.full((ROWS, RESPONSE), -9.0),
        "advantages": torch.randn(ROWS, RESPONSE, generator=generator),
    }


def _rank(rank: int, world: int, port: int, layout: str, model: str, steps: int, out: Any) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    from hfsdk.core.batch import Batch
    from hfsdk_backend_common.objectives import ActorObjective
    from hfsdk_backend_common.optim_config import OptimConfig
    from hfsdk_policy_losses.losses import ppo_clip_loss

    batch = Batch.from_dict(tensors=make_batch())
    objective = ActorObjective(policy_loss=ppo_clip_loss)
    common = {
        "model_path": model,
        "device": "cpu",
        "mini_batch_size": ROWS,
        "micro_batch_size": 2,
        "optim": OptimConfig(lr=1e-5),
    }
    backend, _, shape = layout.partition(":")
    if backend == "fsdp":
        from hfsdk_backend_fsdp.actor import ActorEngine
        from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

        engine: Any = ActorEngine(FSDPRoleConfig(**common), role="actor")
        part = batch.chunk(world)[rank]
    else:
        from hfsdk_backend_megatron.engine import MegatronEngine
        from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig

        tp, pp = (int(x) for x in shape.split("x"))
        config = MegatronRoleConfig(**common, parallel=ParallelConfig(tp=tp, pp=pp))
        engine = MegatronEngine(config, role="actor", kind="actor")
        part = batch.chunk(engine.dp_size)[engine.dp_rank]
    engine.update_actor(part, objective)  # warm-up
    dist.barrier()
    started = time.perf_counter()
    for _ in range(steps):
        engine.update_actor(part, objective)
    dist.barrier()
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put((rank, elapsed, peak_mb))
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_layout(layout: str, model: str, steps: int) -> tuple[float, list[float]]:
    """``(tokens/s, peak MB per rank)`` of ``layout`` (``fsdp:N`` or ``megatron:TPxPP``)."""
    backend, _, shape = layout.partition(":")
    world = int(shape) if backend == "fsdp" else int(shape.split("x")[0]) * int(shape.split("x")[1])
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_rank, args=(r, world, port, layout, model, steps, queue))
        for r in range(world)
    ]
    for proc in procs:
        proc.start()
    results = sorted(queue.get(timeout=1800) for _ in procs)
    for proc in procs:
        proc.join()
    elapsed = max(r[1] for r in results)
    return steps * ROWS * (PROMPT + RESPONSE) / elapsed, [r[2] for r in results]


def main() -> None:
    """Build the model, run every layout, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", nargs="*", default=list(DEFAULT_LAYOUTS))
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        params = build_model(Path(tmp))
        print(
            f"model: {params / 1e6:.1f}M parameters; batch {ROWS} x {PROMPT + RESPONSE} tokens; "
            f"{args.steps} timed updates; {os.cpu_count()} CPUs"
        )
        header = f"{'backend:layout':<16} {'ranks':>5} {'update tok/s':>12} {'peak MB/rank':>14}"
        print(header)
        print("-" * len(header))
        for layout in args.layouts:
            tokens_per_s, peaks = run_layout(layout, tmp, args.steps)
            peak = "/".join(f"{p:.0f}" for p in peaks)
            print(f"{layout:<16} {len(peaks):>5} {tokens_per_s:>12.0f} {peak:>14}", flush=True)


if __name__ == "__main__":
    main()
