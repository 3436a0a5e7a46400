"""Drive many trajectories at once and assemble the rollout contract's output batch.

:func:`run_agents` runs the configured agent loop on every prompt row
concurrently (asyncio; tools run in threads or as coroutines, requests go to the
rollout as they come) and :func:`assemble` turns the trajectories into the batch
every algorithm reads, with these columns:

- ``responses``: everything after the prompt (model and tool tokens), right-padded
  to ``max_response_tokens``; ``input_ids`` = prompt + responses;
- ``attention_mask``: every real token, tool tokens included (they are context);
- ``response_mask``: the **loss mask**, 1 on the model's own tokens only. Log-probs,
  the reference KL, the score position (the last model token) and the advantages
  all go through it, so tool tokens are never trained on;
- ``rollout_log_probs``: the sampling log-probs the rollout reported, 0 off the mask
  (only when the rollout reports them);
- non-tensors: the prompt's columns, ``response_text`` (the whole response decoded),
  ``agent_trajectory`` (the turns as JSON for the rollout dump), ``agent_turns``,
  ``agent_tool_calls``, ``agent_tool_errors``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from hfsdk_agents.config import MultiTurnConfig
from hfsdk_agents.loops import AgentContext, AgentLoop
from hfsdk_agents.requests import RequestServer
from hfsdk_agents.trajectory import Trajectory

if TYPE_CHECKING:
    import torch

    from hfsdk import Batch


def run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` to the end from sync code (a fresh thread if a loop is running here)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def run_agents(
    loop: AgentLoop,
    ctx: AgentContext,
    prompts: Sequence[tuple[int, ...]],
    rows: Sequence[dict[str, Any]],
    seeds: Sequence[int],
    *,
    max_concurrent: int,
    server: RequestServer | None = None,
) -> list[Trajectory]:
    """One trajectory per prompt, at most ``max_concurrent`` in flight, in prompt order.

    ``server`` (the one behind ``ctx.generate``) is told when each trajectory starts
    and ends, so a turn-by-turn server knows whom to wait for.
    """
    gate = asyncio.Semaphore(max_concurrent)

    async def one(index: int) -> Trajectory:
        async with gate:
            if server is not None:
                server.trajectory_started()
            try:
                return await loop.run(prompts[index], rows[index], ctx, seed=seeds[index])
            finally:
                if server is not None:
                    server.trajectory_finished()

    return list(await asyncio.gather(*(one(i) for i in range(len(prompts)))))


def trajectory_metrics(trajectories: Sequence[Trajectory]) -> dict[str, tuple[float, float]]:
    """Per-step agent metrics as (sum, count) pairs, so ranks can add them up before dividing."""
    turns = calls = errors = seconds = 0.0
    context = total = 0.0
    budget = dropped = 0.0
    for t in trajectories:
        dropped += float(t.finish == "dropped")  # a gateway agent that failed
        n_calls, n_errors, n_seconds = t.tool_stats()
        turns += t.turns
        calls += n_calls
        errors += n_errors
        seconds += n_seconds
        mask = t.loss_mask
        context += len(mask) - sum(mask)
        total += len(mask)
        budget += float(t.finish == "budget")
    n = float(len(trajectories))
    return {
        "agent/turns_mean": (turns, n),
        "agent/tool_calls_per_trajectory": (calls, n),
        "agent/tool_errors_per_trajectory": (errors, n),
        "agent/tool_call_success": (calls - errors, calls),
        "agent/tool_latency_s_mean": (seconds, calls),
        "agent/context_token_share": (context, total),
        "agent/budget_finish_share": (budget, n),
        "agent/dropped": (dropped, n),
    }


def agree_metrics(pairs: dict[str, tuple[float, float]], group: Any = None) -> dict[str, float]:
    """Sums over the data-parallel ``group`` (when given), then sum / count (0 when empty)."""
    import torch

    names = sorted(pairs)
    values = torch.tensor([[pairs[k][0], pairs[k][1]] for k in names], dtype=torch.float64)
    if group is not None:
        import torch.distributed as dist

        dist.all_reduce(values, group=group)
    return {
        k: float(values[i, 0] / values[i, 1]) if float(values[i, 1]) > 0 else 0.0
        for i, k in enumerate(names)
    }


def assemble(
    prompts: Batch,
    trajectories: Sequence[Trajectory],
    *,
    tokenizer: Any,
    width: int,
    temperature: float,
    greedy: bool,
    metrics: dict[str, float],
) -> Batch:
    """The output batch (see the module docstring); ``prompts`` has one row per trajectory."""
    import torch

    from hfsdk import Batch

    rows = len(trajectories)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    responses = torch.full((rows, width), pad, dtype=torch.long)
    present = torch.zeros((rows, width), dtype=torch.long)
    loss_mask = torch.zeros((rows, width), dtype=torch.float32)
    log_probs = torch.zeros((rows, width), dtype=torch.float32)
    reported = True
    for row, trajectory in enumerate(trajectories):
        ids = trajectory.response_ids[:width]
        length = len(ids)
        if length:
            responses[row, :length] = torch.tensor(ids, dtype=torch.long)
            present[row, :length] = 1
            loss_mask[row, :length] = torch.tensor(trajectory.loss_mask[:width])
            lp = trajectory.response_logprobs[:width]
            if any(math.isnan(v) for v in lp):
                reported = False
            else:
                log_probs[row, :length] = torch.tensor(lp)
    prompt_ids = prompts["input_ids"]
    attention_mask = torch.cat([prompts["attention_mask"].long(), present], dim=1)
    tensors: dict[str, torch.Tensor] = {
        "prompts": prompt_ids,
        "responses": responses,
        "input_ids": torch.cat([prompt_ids, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(dim=-1) - 1).clamp(min=0),
        "response_mask": loss_mask,
    }
    if reported and rows:
        tensors["rollout_log_probs"] = log_probs * loss_mask
    non_tensors: dict[str, Any] = {k: prompts[k] for k in prompts.non_tensor_keys}
    # The text of what the tensors hold: a reward must score the response that is trained on.
    non_tensors["response_text"] = [
        tokenizer.decode(t.response_ids[:width], skip_special_tokens=True) for t in trajectories
    ]
    non_tensors["agent_trajectory"] = [t.to_json() for t in trajectories]
    non_tensors["agent_turns"] = [t.turns for t in trajectories]
    non_tensors["agent_tool_calls"] = [t.tool_stats()[0] for t in trajectories]
    non_tensors["agent_tool_errors"] = [t.tool_stats()[1] for t in trajectories]
    return Batch.from_dict(
        tensors=tensors,
        non_tensors=non_tensors,
        meta={
            **prompts.meta,
            "temperature": 1.0 if greedy else temperature,
            "greedy": greedy,
            "rollout_metrics": metrics,
        },
        batch_size=rows,
    )


def prompt_rows(prompts: Batch) -> tuple[list[tuple[int, ...]], list[dict[str, Any]]]:
    """Each row's prompt ids without padding, and its non-tensor columns."""
    ids, mask = prompts["input_ids"], prompts["attention_mask"].bool()
    tokens = [tuple(ids[i][mask[i]].tolist()) for i in range(len(prompts))]
    columns = [{k: prompts[k][i] for k in prompts.non_tensor_keys} for i in range(len(prompts))]
    return tokens, columns


def check_width(config: MultiTurnConfig, prompt_width: int, limit: int | None) -> None:
    """Refuse a budget the rollout cannot hold (prompt + responses over its context)."""
    from hfsdk import ConfigError

    if limit is not None and prompt_width + config.max_response_tokens > limit:
        raise ConfigError(
            f"rollout.multi_turn.max_response_tokens={config.max_response_tokens} plus prompts "
            f"{prompt_width} tokens wide exceed rollout.max_prompt_length={limit}, which caps "
            "every turn's context; raise max_prompt_length or lower the budget"
        )
