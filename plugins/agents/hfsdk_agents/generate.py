"""Multi-turn generation: the agent loop as a rollout's generation strategy.

The plugin answers ``hfsdk_wrap_generation`` with :func:`wrap_generation`: when
``rollout.multi_turn`` is active, workers' ``hfsdk.generate_rollout`` runs the
configured agent loop on every row instead of one ``generate_sequences`` call.
It goes through the rollout contract only, so every training backend and every
rollout backend works with it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from hfsdk import ConfigError, HfsdkError
from hfsdk_agents.config import MultiTurnConfig, multi_turn_config

if TYPE_CHECKING:
    from hfsdk import Batch, RolloutBackend


def wrap_generation(rollout: RolloutBackend) -> AgentGeneration | None:
    """The agent loop for ``rollout`` when its ``multi_turn`` sub-section is active."""
    config = multi_turn_config(rollout.config)
    return AgentGeneration(rollout, config) if config.active else None


class AgentGeneration:
    """A rollout's generation strategy (:class:`hfsdk.GenerationStrategy`): multi-turn
    agent trajectories with the same keys as ``generate_sequences`` plus the agent
    columns (:mod:`hfsdk_agents.runner`). Its tools, parser and loop are built on the
    first call (only the ranks that generate pay for them)."""

    def __init__(self, rollout: RolloutBackend, config: MultiTurnConfig) -> None:
        self.rollout = rollout
        self.config = config
        self._built: AgentRollout | None = None

    def generate(self, prompts: Batch) -> Batch:
        """Trajectories for the rows of ``prompts`` (``meta['n']`` per prompt)."""
        if self._built is None:
            self._built = AgentRollout(self.rollout, self.config)
        return self._built.generate(prompts)


class AgentRollout:
    """The agent loop, its tools, parser and renderer for one rollout, built once."""

    def __init__(self, rollout: RolloutBackend, config: MultiTurnConfig) -> None:
        from hfsdk import get_registry
        from hfsdk_agents.loops import load_agent_loop
        from hfsdk_agents.parsers import CALL_END_MARKERS
        from hfsdk_agents.tool_worker import ToolWorkers
        from hfsdk_agents.tools import load_tools
        from hfsdk_agents.trajectory import ChatTemplateRenderer, PlainRenderer

        self.rollout = rollout
        self.config = config
        actor = rollout.actor
        tokenizer = actor.tokenizer
        self.tokenizer = tokenizer
        eos = {*(actor.generation_eos_ids or [])}
        if tokenizer.eos_token_id is not None:
            eos.add(int(tokenizer.eos_token_id))
        self.eos_ids = tuple(sorted(eos))
        self.tools = load_tools(config.tools)
        # One worker process for the tool set, forked on the first call, killed with us.
        self.tool_workers = ToolWorkers({name: tool.fn for name, tool in self.tools.items()})
        parser_entry = get_registry("tool_parsers")[config.parser]
        self.parser = parser_entry.impl
        end = parser_entry.extra.get("end_marker", CALL_END_MARKERS.get(config.parser))
        stops = {*self.eos_ids, *config.stop_token_ids}
        if end:
            end_ids = tokenizer.encode(end, add_special_tokens=False)
            # A one-token call end stops the turn right after the call (not an unknown token).
            if len(end_ids) == 1 and tokenizer.decode(end_ids).strip() == end:
                stops.add(int(end_ids[0]))
        self.stop_ids = tuple(sorted(stops))
        renderer = config.renderer
        if renderer == "auto":
            renderer = "chat_template" if getattr(tokenizer, "chat_template", None) else "plain"
        if renderer == "chat_template":
            if not getattr(tokenizer, "chat_template", None):
                raise ConfigError(
                    "rollout.multi_turn.renderer=chat_template but the tokenizer has no chat "
                    "template; use renderer=plain (or auto)"
                )
            # The prompts' tool schemas (the tools', then one environment's, as
            # prompt_tool_schemas renders them), so a re-rendered conversation matches its
            # prompt.
            from hfsdk_agents.environments.checks import environment_schemas

            schemas = tuple(
                [dict(tool.schema) for tool in self.tools.values()] + environment_schemas(config)
            )
            self.renderer: Any = ChatTemplateRenderer(tokenizer, self.stop_ids, schemas)
        else:
            self.renderer = PlainRenderer(tokenizer)
        self.loop = load_agent_loop(config.loop_name)(**config.loop_args)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def generate(self, prompts: Batch) -> Batch:
        """Trajectories for the rows of ``prompts`` (repeated ``meta['n']`` times)."""
        import torch

        from hfsdk import run_coroutine
        from hfsdk_agents.images import image_turns
        from hfsdk_agents.loops import AgentContext
        from hfsdk_agents.runner import (
            agree_metrics,
            assemble,
            check_width,
            prompt_rows,
            run_agents,
            trajectory_metrics,
        )

        rollout_config = self.rollout.config
        temperature = float(getattr(rollout_config, "temperature", 1.0))
        greedy = bool(prompts.meta.get("greedy", temperature == 0))
        n = int(prompts.meta.get("n", 1))
        if n < 1:
            raise HfsdkError(f"n={n}; expected at least one response per prompt")
        rows = prompts.repeat(n, interleave=True) if n > 1 else prompts
        check_width(
            self.config,
            rows["input_ids"].shape[1],
            getattr(rollout_config, "max_prompt_length", None),
        )
        images = image_turns(self.rollout)
        if images is not None:
            rows = images.image_prompts(rows)
        from hfsdk_agents.requests import request_server

        server = request_server(
            self.rollout, pad_id=self.pad_id, eos_ids=self.eos_ids, serving=self.config.serving
        )
        ctx = AgentContext(
            generate=server.generate,
            tokenizer=self.tokenizer,
            tools=self.tools,
            parser=self.parser,
            renderer=self.renderer,
            config=self.config,
            stop_token_ids=self.stop_ids,
            temperature=temperature,
            top_p=float(getattr(rollout_config, "top_p", 1.0)),
            top_k=int(getattr(rollout_config, "top_k", 0)),
            greedy=greedy,
            applies_sampling=server.applies_sampling,
            tool_workers=self.tool_workers,
            images=images,
        )
        tokens, columns = prompt_rows(rows)
        # Seeds from the torch RNG the trainer checkpoints, so a resumed run draws the same ones.
        base = int(torch.randint(0, 2**31 - 1, (1,)).item())
        seeds = [base + i * self.config.max_turns for i in range(len(tokens))]
        # A request-serving rollout holds its weights for the whole step (collective: every
        # rank of the actor is here); turn batching goes through generate_sequences instead.
        # An image rollout holds them too: ranks take different numbers of turns.
        holding = self.rollout.serving() if images is not None else contextlib.nullcontext()
        with holding, server.serving():
            trajectories = run_coroutine(
                run_agents(
                    self.loop,
                    ctx,
                    tokens,
                    columns,
                    seeds,
                    max_concurrent=self.config.max_concurrent,
                    server=server,
                )
            )
        dp = self.rollout.actor.dp
        metrics = agree_metrics(
            trajectory_metrics(trajectories), dp.group if dp.distributed else None
        )
        out = assemble(
            rows,
            trajectories,
            tokenizer=self.tokenizer,
            width=self.config.max_response_tokens,
            temperature=temperature,
            greedy=greedy,
            metrics=metrics,
        )
        if images is None:
            return out
        return images.with_images(out, [t.images for parts in trajectories for t in parts])
