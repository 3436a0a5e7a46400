"""Multi-turn rollouts on a rollout pool's replica: the replica builds its rollout with
``hfsdk.build_rollout`` and generates with ``hfsdk.generate_rollout``, so the agents
plugin's strategy runs there without the backend naming it."""

from __future__ import annotations

import torch

from hfsdk import Batch
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.run_assets import resolve_assets
from hfsdk_agents.generate import AgentGeneration
from hfsdk_agents.tool_use.build import ensure_tool_use_assets, tool_use_preset
from hfsdk_agents.tool_use.task import RESPONSE_OPEN
from hfsdk_backend_common.rollout.replica import RolloutReplicaWorker

PROMPTS = ["3 + 4 =", "12 + 9 =", "20 + 7 =", "5 + 5 ="]


def test_a_replica_runs_the_agent_loop_with_its_tools() -> None:
    config = load_run_config("grpo", None, [], base=tool_use_preset(ensure_tool_use_assets()))
    assets = resolve_assets(config, "actor")
    replica = RolloutReplicaWorker(
        role="rollout", config=config, assets=assets, section=config.actor
    )
    assert isinstance(replica.rollout.generation, AgentGeneration)
    tokenizer = replica.source.tokenizer
    enc = tokenizer(PROMPTS, return_tensors="pt", padding=True, padding_side="left")
    prompts = Batch.from_dict(
        tensors={"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]},
        non_tensors={"uid": list(range(len(PROMPTS))), "raw_prompt": PROMPTS},
        meta={"n": 4, "greedy": False},
    )
    torch.manual_seed(0)
    out = replica.generate_sequences(prompts)
    width = config.rollout.response_width()
    assert width == 24 and out["responses"].shape == (16, width)
    trajectories = list(out["agent_trajectory"])
    assert len(trajectories) == 16
    # the warm-started model calls `add` often; a called tool's answer is in the context,
    # as tool tokens the actor does not train on
    tool_id = tokenizer.convert_tokens_to_ids(RESPONSE_OPEN)
    with_tool = out["responses"].eq(tool_id).any(dim=1)
    assert with_tool.sum() >= 4
    for row in torch.nonzero(with_tool).flatten().tolist():
        column = int(out["responses"][row].eq(tool_id).nonzero()[0])
        assert out["response_mask"][row, column] == 0
    metrics = out.meta["rollout_metrics"]
    assert metrics["agent/tool_calls_per_trajectory"] > 0 and metrics["agent/turns_mean"] > 1
    assert out.meta["weights_version"] == replica.source.weights_version
