"""The gateway's per-request overhead: an openai-SDK request through it against calling
request-level generation directly.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/gateway.py [--requests 200] [--sessions 1]

The engine is a stand-in that answers at once (two tokens, no model), so what is
measured is only what the gateway adds per request: the SDK building the call, HTTP on
loopback, FastAPI parsing, the hand-over to the rollout's event loop, matching the
conversation against the session's history, rendering the new user message, parsing
the answer and building the response. Each session is one agent that sends
``--requests`` chat requests, each the conversation so far plus one new user message
(the realistic shape of a multi-turn agent); ``direct`` sends the same token contexts
to the engine with ``await generate(request)``. The table shows the median and the
90th percentile per request, the median added latency, and this process's CPU time per
request (less sensitive to other load on a shared machine than wall time). Uses the ``tool_use``
task's word-level tokenizer and the plain renderer; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time
from typing import Any

from hfsdk import GenerationRequest, GenerationResult


def _setup(requests: int) -> tuple[Any, Any]:
    from hfsdk_agents.config import MultiTurnConfig
    from hfsdk_agents.loops import AgentContext
    from hfsdk_agents.parsers import hermes_parser
    from hfsdk_agents.tool_use.build import ToolUseSpec, train_tokenizer
    from hfsdk_agents.trajectory import PlainRenderer

    tokenizer = train_tokenizer(ToolUseSpec())
    answer = [*tokenizer.encode("7", add_special_tokens=False), tokenizer.eos_token_id]

    async def engine(request: GenerationRequest) -> GenerationResult:
        return GenerationResult(
            token_ids=answer, logprobs=[-0.5] * len(answer), finish_reason="stop"
        )

    config = MultiTurnConfig(
        agent="bench:agent", max_turns=requests + 1, max_response_tokens=8 * requests + 8
    )
    ctx = AgentContext(
        generate=engine,
        tokenizer=tokenizer,
        tools={},
        parser=hermes_parser,
        renderer=PlainRenderer(tokenizer),
        config=config,
        stop_token_ids=(tokenizer.eos_token_id,),
    )
    return ctx, tokenizer


def through_gateway(requests: int, sessions: int) -> tuple[list[float], float]:
    """Per-request seconds seen by openai-SDK agents, ``sessions`` of them at once, and the
    process's CPU seconds per request (set-up and the server's start excluded)."""
    import sys

    import openai

    from hfsdk_agents.gateway.examples.tool_use_agent import http_client
    from hfsdk_agents.gateway.loop import GatewayLoop

    ctx, tokenizer = _setup(requests)
    timings: list[float] = []

    def agent(base_url: str, row: dict[str, Any]) -> None:
        client = openai.OpenAI(
            base_url=base_url, api_key="unused", max_retries=0, http_client=http_client()
        )
        messages: list[Any] = [{"role": "user", "content": row["raw_prompt"]}]
        for _ in range(requests):
            started = time.perf_counter()
            reply = client.chat.completions.create(model="policy", messages=messages)
            timings.append(time.perf_counter() - started)
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "user", "content": "1"})

    module = type(sys)("bench")
    module.agent = agent  # type: ignore[attr-defined]
    sys.modules["bench"] = module
    loop = GatewayLoop()
    loop.server  # started before the clock  # noqa: B018
    openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="unused")  # the SDK's imports
    prompt = tuple(tokenizer.encode("3 + 4 ="))
    row = {"raw_prompt": "3 + 4 ="}

    async def run_all() -> None:
        await asyncio.gather(*(loop.run(prompt, row, ctx, seed=i) for i in range(sessions)))

    # One session before the clock: the SDK and FastAPI build their models lazily on first use.
    asyncio.run(loop.run(prompt, row, ctx, seed=0))
    timings.clear()
    cpu = time.process_time()
    try:
        asyncio.run(run_all())
    finally:
        cpu = time.process_time() - cpu
        loop.close()
    return timings, cpu / max(len(timings), 1)


def direct(requests: int) -> tuple[list[float], float]:
    """Per-request seconds of ``await generate(request)`` with the same contexts, and CPU
    seconds per request."""
    ctx, tokenizer = _setup(requests)
    context = list(tokenizer.encode("3 + 4 ="))
    step = [*tokenizer.encode("7", add_special_tokens=False), tokenizer.eos_token_id]
    step += tokenizer.encode(" 1", add_special_tokens=False)
    timings: list[float] = []

    async def run() -> None:
        nonlocal context
        for _ in range(requests):
            started = time.perf_counter()
            await ctx.generate(GenerationRequest(prompt_ids=context, max_new_tokens=8, seed=0))
            timings.append(time.perf_counter() - started)
            context = context + step

    cpu = time.process_time()
    asyncio.run(run())
    return timings, (time.process_time() - cpu) / requests


def _row(name: str, timings: list[float]) -> str:
    ordered = sorted(timings)
    # Nearest rank: the smallest timing that 90 % of the requests do not exceed, so
    # the p90 is never below the median (flooring ``0.9 * (n - 1)`` gave the minimum
    # for two requests).
    p90 = ordered[math.ceil(0.9 * len(ordered)) - 1]
    return f"| {name} | {len(timings)} | {statistics.median(timings) * 1e3:.2f} | {p90 * 1e3:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=1)
    args = parser.parse_args()
    gateway, gateway_cpu = through_gateway(args.requests, args.sessions)
    base, direct_cpu = direct(args.requests)
    print("| path | requests | median ms | p90 ms |")
    print("|---|---|---|---|")
    print(_row(f"gateway (openai SDK, {args.sessions} session(s))", gateway))
    print(_row("direct generate", base))
    added = statistics.median(gateway) - statistics.median(base)
    print(f"\nmedian added latency per request: {added * 1e3:.2f} ms")
    # CPU seconds of this process per request (client, server and session together): less
    # sensitive than wall time to other processes on a shared machine.
    print(f"CPU per request: gateway {gateway_cpu * 1e3:.2f} ms, direct {direct_cpu * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
