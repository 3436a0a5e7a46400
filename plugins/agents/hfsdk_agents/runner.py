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
  ``agent_tool_calls``, ``agent_tool_errors`` (the whole trajectory's), and
  ``segment_index`` (:data:`hfsdk.SEGMENT_INDEX`).

Step-wise trajectories (a loop that returns several segments) give one row per
segment, consecutive, numbered by ``segment_index``. A later segment's row keeps
the prompt it shares with the trajectory's prompt; the rest of its prompt (the
earlier turns as rendered again) opens its responses as context (mask 0), so
every row has the batch's prompt width and the budget's response width.
"""

from __future__ import annotations

import asyncio
import copy
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hfsdk import HfsdkError
from hfsdk_agents.config import MultiTurnConfig
from hfsdk_agents.loops import AgentContext, AgentLoop
from hfsdk_agents.requests import RequestServer
from hfsdk_agents.trajectory import Trajectory, shared_prefix

if TYPE_CHECKING:
    import torch

    from hfsdk import Batch


async def run_agents(
    loop: AgentLoop,
    ctx: AgentContext,
    prompts: Sequence[tuple[int, ...]],
    rows: Sequence[dict[str, Any]],
    seeds: Sequence[int],
    *,
    max_concurrent: int,
    server: RequestServer | None = None,
) -> list[list[Trajectory]]:
    """Each prompt's trajectory as its segments, at most ``max_concurrent`` in flight,
    in prompt order.

    ``server`` (the one behind ``ctx.generate``) is told when each trajectory starts
    and ends, so a turn-by-turn server knows whom to wait for. Each trajectory gets its
    own copy of its row's containers (:func:`_own_copy`): the n samples of a prompt share
    the batch's column objects, so a loop or environment that changes its row would change
    its siblings' rows, later epochs' and the columns the rewards read.
    """
    gate = asyncio.Semaphore(max_concurrent)
    tasks: list[asyncio.Future[list[Trajectory]]] = []

    async def one(index: int) -> list[Trajectory]:
        try:
            async with gate:
                if server is not None:
                    server.trajectory_started()
                try:
                    row = _own_copy(rows[index])
                    made = await loop.run(prompts[index], row, ctx, seed=seeds[index])
                finally:
                    if server is not None:
                        server.trajectory_finished()
        except (Exception, asyncio.CancelledError):
            raise
        except BaseException:
            # An expired deadline or a stop interrupted a blocking call of this trajectory:
            # no other may step on, or its own blocking call (an environment's reset) would
            # hang the loop again with the deadline spent.
            for task in tasks:
                task.cancel()
            raise
        return as_segments(made, loop)

    tasks.extend(asyncio.ensure_future(one(i)) for i in range(len(prompts)))
    return list(await asyncio.gather(*tasks))


def _own_copy(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` for one trajectory: its mutable containers copied, all the way down, the
    rest shared.

    Dicts, lists, sets, bytearrays and numpy arrays are copied (an object array deeply);
    strings, bytes, numbers, PIL images and the like are shared: a trajectory cannot
    change them in place, and a deep copy of a decoded image costs milliseconds on the
    event loop every trajectory shares. A tuple is rebuilt only when it holds a container.
    One object under two keys stays one object in the copy.
    """
    try:
        return _copied(row, {})
    except Exception as err:
        raise HfsdkError(
            f"a prompt row's columns ({', '.join(sorted(map(str, row)))}) cannot be copied for "
            f"each trajectory: copying raised {type(err).__name__}: {err}; keep data (text, "
            "numbers, lists, dicts, images, arrays) in the dataset's columns"
        ) from err


def _copied(value: Any, memo: dict[int, Any]) -> Any:
    """``value`` with its mutable containers copied (see :func:`_own_copy`); ``memo`` maps
    the ids of the containers copied so far to their copies (shared objects, cycles)."""
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, dict):
        out: Any = copy.copy(value)  # keeps a subclass (a defaultdict's factory)
        memo[id(value)] = out
        for key, item in value.items():
            out[key] = _copied(item, memo)
        return out
    if isinstance(value, list):
        out = copy.copy(value)
        memo[id(value)] = out
        out[:] = [_copied(item, memo) for item in value]
        return out
    if isinstance(value, (set, bytearray)):
        out = copy.copy(value)  # a set's items are hashable, so not containers to copy
        memo[id(value)] = out
        return out
    if isinstance(value, tuple):
        items = [_copied(item, memo) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        out = type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        memo[id(value)] = out
        return out
    numpy = sys.modules.get("numpy")  # a row holds an array only where numpy is loaded
    if numpy is not None and isinstance(value, numpy.ndarray):
        out = copy.deepcopy(value, {}) if value.dtype == object else value.copy()
        memo[id(value)] = out
        return out
    return value


def as_segments(made: Any, loop: AgentLoop) -> list[Trajectory]:
    """A loop's result as a non-empty list of segments (a lone trajectory is one).

    A segment without a model token is only context: it is dropped (the last one is
    kept when no segment has one), so the last segment, which is scored, is trained on.
    """
    segments = [made] if isinstance(made, Trajectory) else made
    if (
        not isinstance(segments, list)
        or not segments
        or not all(isinstance(t, Trajectory) for t in segments)
    ):
        raise HfsdkError(
            f"agent loop {type(loop).__name__}.run returned {type(made).__name__}; expected a "
            "Trajectory or a non-empty list of Trajectory segments"
        )
    trained = [t for t in segments if t.turns]
    return trained or segments[-1:]


def trajectory_metrics(
    trajectories: Sequence[Trajectory | Sequence[Trajectory]],
) -> dict[str, tuple[float, float]]:
    """Per-step agent metrics as (sum, count) pairs, so ranks can add them up before dividing.

    ``trajectories``: each trajectory's segments (or a lone Trajectory); the counts are
    per trajectory.
    """
    trajectories = _grouped(trajectories)
    turns = calls = errors = seconds = 0.0
    context = total = 0.0
    budget = segments = dropped = 0.0
    for parts in trajectories:
        for t in parts:
            n_calls, n_errors, n_seconds = t.tool_stats()
            turns += t.turns
            calls += n_calls
            errors += n_errors
            seconds += n_seconds
            mask = t.loss_mask
            context += len(mask) - sum(mask) + t.carried
            total += len(mask) + t.carried
        budget += float(parts[-1].finish == "budget")
        dropped += float(parts[-1].finish == "dropped")  # a gateway agent that failed
        segments += len(parts)
    n = float(len(trajectories))
    return {
        "agent/turns_mean": (turns, n),
        "agent/tool_calls_per_trajectory": (calls, n),
        "agent/tool_errors_per_trajectory": (errors, n),
        "agent/tool_call_success": (calls - errors, calls),
        "agent/tool_latency_s_mean": (seconds, calls),
        "agent/context_token_share": (context, total),
        "agent/budget_finish_share": (budget, n),
        "agent/segments_per_trajectory": (segments, n),
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
    trajectories: Sequence[Trajectory | Sequence[Trajectory]],
    *,
    tokenizer: Any,
    width: int,
    temperature: float,
    greedy: bool,
    metrics: dict[str, float],
) -> Batch:
    """The output batch (see the module docstring); ``prompts`` has one row per trajectory,
    ``trajectories`` each one's segments (one row each; a lone Trajectory is one segment)."""
    import torch

    from hfsdk import SEGMENT_INDEX, Batch

    trajectories = _grouped(trajectories)

    source = [i for i, parts in enumerate(trajectories) for _ in parts]
    segments = [t for parts in trajectories for t in parts]
    rows = len(segments)
    out_prompts = prompts.index(torch.tensor(source, dtype=torch.long)) if rows else prompts
    prompt_ids = out_prompts["input_ids"].clone()
    prompt_mask = out_prompts["attention_mask"].long().clone()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    responses = torch.full((rows, width), pad, dtype=torch.long)
    present = torch.zeros((rows, width), dtype=torch.long)
    loss_mask = torch.zeros((rows, width), dtype=torch.float32)
    log_probs = torch.zeros((rows, width), dtype=torch.float32)
    reported = True
    texts: list[str] = []
    index = [k for parts in trajectories for k in range(len(parts))]
    for row, trajectory in enumerate(segments):
        own = prompt_ids[row][prompt_mask[row].bool()].tolist()
        # A segment keeps the prompt it shares with the row; the rest is context (a later
        # segment's re-render, or a gateway agent's own first request, e.g. a system prompt).
        shared = shared_prefix(trajectory.prompt_ids, own)
        if shared < len(own):
            prompt_ids[row] = pad
            prompt_mask[row] = 0
            if shared:
                prompt_ids[row, -shared:] = torch.tensor(own[:shared], dtype=torch.long)
                prompt_mask[row, -shared:] = 1
        carried = list(trajectory.prompt_ids[shared:])
        ids = (carried + trajectory.response_ids)[:width]
        length = len(ids)
        texts.append(tokenizer.decode(ids, skip_special_tokens=True))
        if not length:
            continue
        responses[row, :length] = torch.tensor(ids, dtype=torch.long)
        present[row, :length] = 1
        mask = ([0] * len(carried) + trajectory.loss_mask)[:width]
        loss_mask[row, :length] = torch.tensor(mask, dtype=torch.float32)
        lp = ([0.0] * len(carried) + trajectory.response_logprobs)[:width]
        if any(math.isnan(v) for v in lp):
            reported = False
        else:
            log_probs[row, :length] = torch.tensor(lp)
    attention_mask = torch.cat([prompt_mask, present], dim=1)
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
    non_tensors: dict[str, Any] = {k: out_prompts[k] for k in out_prompts.non_tensor_keys}
    # The text of what the tensors hold: a reward must score the response that is trained on.
    non_tensors["response_text"] = texts
    non_tensors["agent_trajectory"] = [t.to_json() for t in segments]
    non_tensors[SEGMENT_INDEX] = index
    # Whole-trajectory counts on each of its rows (a reward reads them on the last one).
    stats = [(sum(t.turns for t in p), *_tool_counts(p)) for p in trajectories]
    non_tensors["agent_turns"] = [stats[i][0] for i in source]
    non_tensors["agent_tool_calls"] = [stats[i][1] for i in source]
    non_tensors["agent_tool_errors"] = [stats[i][2] for i in source]
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


def _grouped(
    trajectories: Sequence[Trajectory | Sequence[Trajectory]],
) -> list[Sequence[Trajectory]]:
    return [[t] if isinstance(t, Trajectory) else t for t in trajectories]


def _tool_counts(parts: Sequence[Trajectory]) -> tuple[int, int]:
    stats = [t.tool_stats() for t in parts]
    return sum(s[0] for s in stats), sum(s[1] for s in stats)


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
