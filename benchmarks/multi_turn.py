"""Multi-turn rollouts: request-level generation against a turn-synchronous batch loop.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/multi_turn.py [--trajectories 32]
        [--max-turns 4] [--new-tokens 16] [--model tiny|30m] [--repeats 3]

A scripted agent loop of our own (no parser, no real tool): every trajectory
has 1..``--max-turns`` turns (drawn once, seeded); a turn is generate → a fake
tool that sleeps 50–300 ms (uniform, seeded per trajectory and turn) →
append a fixed 4-token tool output → generate. Both loops drive the same
``hf`` rollout (:class:`HFRollout` on an fsdp actor of the model, its
continuous-batching request server) with the same requests (sampled at
temperature 1, per-request seeds), so they decode the same tokens:

- **request-level**: every trajectory is its own coroutine; it sends its next
  request as soon as its own tool returns, and the server batches whatever
  requests are ready between decode steps.
- **turn-synchronous**: each turn, all unfinished trajectories generate
  together (one batch, sent at once), then every trajectory waits for the
  slowest tool of the turn before the next turn starts.

trajectories/s = trajectories / wall time of the whole rollout; generation-busy
share = seconds inside the server's decode steps / wall time. The loop's own
per-turn overhead is measured with a tool that returns at once (0 ms):
(wall - decode seconds) / turns, the cost of the coroutine, the request and
the scheduling around every turn. The table shows medians over ``--repeats``.
Models: ``tiny`` is the default task's model; ``30m`` a random Llama of about
29M parameters (hidden 512, 9 layers) with the default task's tokenizer,
built locally. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

LATENCY_S = (0.05, 0.3)
PROMPTS = ["3 + 4 =", "1 + 2 =", "9 + 9 =", "0 + 7 =", "5 + 5 =", "8 + 1 =", "2 + 6 =", "4 + 4 ="]


def model_dir(name: str, root: Path) -> Path:
    """The model directory: the default task's model, or a ~29M random Llama saved to ``root``."""
    from hfsdk_tasks import ensure_default_assets

    assets = ensure_default_assets()
    if name == "tiny":
        return assets.model_dir
    from transformers import LlamaConfig, LlamaForCausalLM

    from hfsdk_tasks.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(assets.model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=512, intermediate_size=1408, num_hidden_layers=9,
        num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(str(root / "30m"))
    tokenizer.save_pretrained(str(root / "30m"))
    return root / "30m"


def build_rollout(path: Path, new_tokens: int) -> Any:
    """The ``hf`` rollout on a one-process fsdp actor of ``path``."""
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    actor = ActorEngine(FSDPRoleConfig(model_path=str(path), device="cpu"), role="actor")
    return HFRollout(HFRolloutConfig(max_response_length=new_tokens, decoder="hfsdk"), actor)


class Script:
    """The scripted trajectories: prompts, turn counts and tool latencies (all seeded)."""

    def __init__(self, tokenizer: Any, count: int, max_turns: int, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.prompts = [tokenizer(PROMPTS[i % len(PROMPTS)]).input_ids for i in range(count)]
        self.turns = [rng.randint(1, max_turns) for _ in range(count)]
        self.latency = [[rng.uniform(*LATENCY_S) for _ in range(max_turns)] for _ in range(count)]
        self.tool_output = tokenizer(" = 7 ;", add_special_tokens=False).input_ids[:4]

    def request(self, trajectory: int, turn: int, context: list[int], new_tokens: int) -> Any:
        from hfsdk import GenerationRequest

        return GenerationRequest(prompt_ids=context, max_new_tokens=new_tokens,
                                 temperature=1.0, seed=1000 * trajectory + turn)  # fmt: skip


async def request_level(
    rollout: Any, script: Script, new_tokens: int, scale: float, slots: int
) -> int:
    """Every trajectory on its own, at most ``slots`` at once; returns the number of turns run."""
    room = asyncio.Semaphore(slots)

    async def trajectory(i: int) -> int:
        async with room:
            return await run_one(i)

    async def run_one(i: int) -> int:
        context = list(script.prompts[i])
        for turn in range(script.turns[i]):
            result = await rollout.generate_request(script.request(i, turn, context, new_tokens))
            await asyncio.sleep(script.latency[i][turn] * scale)  # the tool
            context += [*result.token_ids, *script.tool_output]
        return script.turns[i]

    return sum(await asyncio.gather(*(trajectory(i) for i in range(len(script.prompts)))))


async def turn_synchronous(
    rollout: Any, script: Script, new_tokens: int, scale: float, slots: int
) -> int:
    """Batches of ``slots`` trajectories; in a batch, all unfinished trajectories generate
    together, then wait for the turn's slowest tool."""
    turns = 0
    for start in range(0, len(script.prompts), slots):
        batch = range(start, min(start + slots, len(script.prompts)))
        turns += await _one_batch(rollout, script, new_tokens, scale, batch)
    return turns


async def _one_batch(
    rollout: Any, script: Script, new_tokens: int, scale: float, batch: range
) -> int:
    contexts = {i: list(script.prompts[i]) for i in batch}
    turns = 0
    for turn in range(max(script.turns[i] for i in batch)):
        active = [i for i in batch if turn < script.turns[i]]
        results = await asyncio.gather(*(
            rollout.generate_request(script.request(i, turn, contexts[i], new_tokens))
            for i in active
        ))  # fmt: skip
        await asyncio.sleep(max(script.latency[i][turn] for i in active) * scale)
        for i, result in zip(active, results, strict=True):
            contexts[i] += [*result.token_ids, *script.tool_output]
        turns += len(active)
    return turns


def measure(
    rollout: Any, loop: Any, script: Script, new_tokens: int, scale: float, slots: int
) -> dict:
    """One rollout of every trajectory: wall seconds, decode seconds, turns."""
    with rollout.serving():
        server = rollout.request_server
        started = time.perf_counter()
        turns = asyncio.run(loop(rollout, script, new_tokens, scale, slots))
        wall = time.perf_counter() - started
        stats = server.stats
        return {"wall": wall, "busy": stats.busy_s, "turns": turns, "tokens": stats.tokens}


def table(rollout: Any, args: argparse.Namespace, count: int, slots: int) -> None:
    """Run both loops over ``count`` trajectories, ``slots`` at a time, and print the table."""
    script = Script(rollout.tokenizer, count, args.max_turns)
    loops = {"request-level": request_level, "turn-synchronous": turn_synchronous}
    rows = {}
    for name, loop in loops.items():
        runs = [measure(rollout, loop, script, args.new_tokens, 1.0, slots)
                for _ in range(args.repeats)]  # fmt: skip
        bare = [measure(rollout, loop, script, args.new_tokens, 0.0, slots)
                for _ in range(args.repeats)]  # fmt: skip
        rows[name] = {
            "wall": statistics.median(r["wall"] for r in runs),
            "busy": statistics.median(r["busy"] / r["wall"] for r in runs),
            "turns": runs[0]["turns"],
            "overhead_ms": statistics.median(
                1000 * (r["wall"] - r["busy"]) / r["turns"] for r in bare
            ),
        }
    base = rows["turn-synchronous"]["wall"]
    print(f"\nmodel {args.model}: {count} trajectories, at most {slots} in flight, "
          f"1..{args.max_turns} turns ({rows['request-level']['turns']} in all), "
          f"{args.new_tokens} new tokens per turn, tool 50-300 ms, "
          f"median of {args.repeats}")  # fmt: skip
    print("| loop | wall s | trajectories/s | speed-up | generation-busy share | "
          "loop overhead per turn (0 ms tool) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['wall']:.2f} | {count / row['wall']:.1f} | "
              f"{base / row['wall']:.2f}x | {100 * row['busy']:.0f}% | "
              f"{row['overhead_ms']:.2f} ms |")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=32)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--model", choices=("tiny", "30m"), default="tiny")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stream", type=int, default=128,
                        help="also run this many trajectories through --trajectories slots "
                             "(0: skip)")  # fmt: skip
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rollout = build_rollout(model_dir(args.model, Path(tmp)), args.new_tokens)
        warm = Script(rollout.tokenizer, args.trajectories, args.max_turns)
        measure(rollout, request_level, warm, args.new_tokens, 0.0, args.trajectories)  # warm-up
        table(rollout, args, args.trajectories, args.trajectories)
        if args.stream:
            table(rollout, args, args.stream, args.trajectories)
    return 0


if __name__ == "__main__":
    sys.exit(main())
