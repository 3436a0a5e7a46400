"""Trajectories/s of the ``tool_use`` task through the agent gateway against the tool loop.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/gateway_throughput.py [--steps 3]

Every row is a real GRPO run of the built-in ``tool_use`` task (its tiny model on
the ``hf`` rollout's request server, 16 prompts x 4 samples = 64 trajectories a
step, the same seed and prompts in every row); what is timed is the rollout
stage of each step (``timing/generation_s``), and trajectories/s = 64 / that,
the median over the steps after the first (the first warms up the server).

- (a) the task as it is: the built-in ``tool_loop`` (request-level serving)
  against the registered openai-SDK agent ``tool_use`` through the gateway.
- (b) the same, with a tool that sleeps 50-300 ms (uniform) per call, the 64
  trajectories' sessions all open at once: the gateway (an openai-SDK agent that
  sleeps in its own tool) against the turn-synchronous tool loop
  (``rollout.multi_turn.serving=turn``, the same sleeping ``add`` in the tool
  worker), and the request-level tool loop for reference.

The model is untrained, so some trajectories call the tool and some answer at
once (``turns`` is the mean model turns). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

LATENCY_S = (0.05, 0.3)
_rng = random.Random()


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    time.sleep(_rng.uniform(*LATENCY_S))  # a slow tool: a web call, a sandbox
    return int(a) + int(b)


def slow_agent(base_url: str, row: dict[str, Any]) -> None:
    """The registered ``tool_use`` agent, whose calculator takes 50-300 ms a call."""
    import openai

    from hfsdk_agents.gateway.examples.tool_use_agent import (
        ADD_TOOL,
        MAX_TURNS,
        http_client,
        run_call,
    )

    client = openai.OpenAI(
        base_url=base_url, api_key="unused", max_retries=0, http_client=http_client()
    )
    messages: list[Any] = [{"role": "user", "content": row["raw_prompt"]}]
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=[ADD_TOOL])
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            time.sleep(_rng.uniform(*LATENCY_S))
            content = run_call(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


def run(steps: int, multi_turn: dict[str, Any], run_dir: Path) -> dict[str, float]:
    """One GRPO run of ``steps`` steps with ``multi_turn`` over the task's settings."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer
    from hfsdk_agents.tool_use.build import ensure_tool_use_assets, tool_use_preset

    base = tool_use_preset(ensure_tool_use_assets())
    base["rollout"]["multi_turn"].update(multi_turn)
    base["trainer"]["total_steps"] = steps
    config = load_run_config("grpo", None, [], base=base)
    Trainer(config, run_dir, quiet=True).fit()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    timed = rows[1:] or rows
    seconds = statistics.median(r["timing/generation_s"] for r in timed)
    return {
        "generate_s": seconds,
        "trajectories_s": 64 / seconds,
        "turns": statistics.mean(r["agent/turns_mean"] for r in rows),
        "calls": statistics.mean(
            r.get("agent/tool_calls_per_trajectory", float("nan")) for r in rows
        ),
        "reward": statistics.mean(r["reward/mean"] for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    here = str(Path(__file__).resolve())
    slow_tool = {"tools": [f"{here}:add"]}
    cases = {
        "(a) tool loop (request-level)": {},
        "(a) gateway, agent tool_use": {"agent": "tool_use"},
        "(b) turn-synchronous tool loop, 50-300 ms tool": {**slow_tool, "serving": "turn"},
        "(b) tool loop (request-level), 50-300 ms tool": slow_tool,
        "(b) gateway, openai agent with a 50-300 ms tool": {"agent": f"{here}:slow_agent"},
    }
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, multi_turn) in enumerate(cases.items()):
            results[name] = run(args.steps, multi_turn, Path(tmp) / f"run{i}")
            print(f"done: {name} {results[name]}", flush=True)
    print(f"\n64 trajectories a step, median of steps 2..{args.steps}")
    print(
        "| case | rollout s per step | trajectories/s | ratio | model turns | tool calls | reward |"
    )
    print("|---|---|---|---|---|---|---|")
    bases = {"(a)": results["(a) tool loop (request-level)"]["generate_s"]}
    bases["(b)"] = results["(b) turn-synchronous tool loop, 50-300 ms tool"]["generate_s"]
    for name, r in results.items():
        ratio = bases[name[:3]] / r["generate_s"]
        print(f"| {name} | {r['generate_s']:.2f} | {r['trajectories_s']:.1f} | {ratio:.2f}x "
              f"| {r['turns']:.2f} | {r['calls']:.2f} | {r['reward']:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
