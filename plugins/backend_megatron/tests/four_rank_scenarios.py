"""One rank of the four-process megatron checks in ``test_layouts.py`` (run as a script).

All layouts run in the same four processes (megatron-core's parallel state
is torn down and rebuilt between them), so the imports and the gloo group
are paid once. Writes what the last stage's tp rank 0 of dp replica 0 saw
to ``--out/<check>.pt``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from hfsdk.core.batch import Batch
from hfsdk_backend_common.objectives import ActorObjective, CriticObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_megatron.engine import MegatronEngine
from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig
from hfsdk_policy_losses.losses import ppo_clip_loss
from hfsdk_ppo.losses import clipped_value_loss

LAYOUTS = ((1, 1), (2, 1), (1, 2), (2, 2))


def engine(path: str, kind: str, tp: int, pp: int, optim: dict[str, Any]) -> MegatronEngine:
    """A fresh engine at (tp, pp) (megatron's groups rebuilt for that layout)."""
    from megatron.core import parallel_state as mpu

    mpu.destroy_model_parallel()
    config = MegatronRoleConfig(
        model_path=path,
        device="cpu",
        parallel=ParallelConfig(tp=tp, pp=pp),
        mini_batch_size=8,
        micro_batch_size=2,
        optim=OptimConfig(**optim),
    )
    return MegatronEngine(config, role=kind, kind=kind)


def my_part(eng: MegatronEngine, batch: Batch) -> Batch:
    """The rows MESH_PROTO would give this rank: its data-parallel replica's chunk."""
    return batch.chunk(eng.dp_size)[eng.dp_rank]


def collector(eng: MegatronEngine) -> bool:
    """Whether this rank is the one the controller would collect (and dp replica 0)."""
    return eng.last_stage and eng.tp_rank == 0 and eng.dp_rank == 0


def main() -> None:
    """Run every check on this rank."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=4
    )
    inputs = torch.load(args.inputs, weights_only=False)
    batch = Batch.from_dict(tensors=inputs["batch"], meta={"temperature": 0.7})
    results: dict[str, Any] = {}

    # Logits at the four layouts, GQA untied and tied models.
    for name in ("gqa", "tied"):
        for tp, pp in LAYOUTS:
            if name == "tied" and (tp, pp) != (2, 2):
                continue
            eng = engine(inputs[name], "actor", tp, pp, inputs["optim"])
            logits = eng.logits(batch)
            if collector(eng):
                results[f"logits_{name}_{tp}{pp}"] = logits
            if (name, tp, pp) == ("gqa", 2, 2):
                out = eng.compute_log_prob(batch)
                shards = eng.named_tp_shards()
                if collector(eng):
                    results["log_prob_22"] = out
                    results["shards_22"] = {
                        k: (v["tp_dim"], v["fused"], tuple(v["tensor"].shape))
                        for k, v in shards.items()
                    }
            del eng

    actor_objective = ActorObjective(policy_loss=ppo_clip_loss, loss_agg_mode="token-mean")
    # One actor update at (2, 2) and at (2, 1) with two data-parallel replicas.
    for tp, pp in ((2, 2), (2, 1)):
        eng = engine(inputs["gqa"], "actor", tp, pp, inputs["optim"])
        metrics = eng.update_actor(my_part(eng, batch), actor_objective)
        state = eng.full_hf_state()
        if collector(eng):
            results[f"actor_update_{tp}{pp}"] = {"state": state, "metrics": metrics}
        if (tp, pp) == (2, 2):
            eng.save_checkpoint(args.out / "ckpt")
            eng.update_actor(my_part(eng, batch), actor_objective)
            state = eng.full_hf_state()
            if collector(eng):
                results["actor_second_22"] = state
        del eng
    # A tied model's update at (1, 1) with four replicas and at (2, 2) (the embedding's two
    # copies summed): the responses' pad token trains its row through the output layer only.
    for tp, pp in ((1, 1), (2, 2)):
        eng = engine(inputs["tied"], "actor", tp, pp, inputs["optim"])
        metrics = eng.update_actor(my_part(eng, batch), actor_objective)
        state = eng.full_hf_state()
        if collector(eng):
            results[f"tied_update_{tp}{pp}"] = {"state": state, "metrics": metrics}
        del eng
    # Reload the (2, 2) checkpoint at (1, 2) with dp=2, then the same second step.
    eng = engine(inputs["gqa"], "actor", 1, 2, inputs["optim"])
    eng.load_checkpoint(args.out / "ckpt")
    eng.update_actor(my_part(eng, batch), actor_objective)
    state = eng.full_hf_state()
    if collector(eng):
        results["actor_second_resharded_12"] = state
    eng.export_hf(args.out / "export")
    del eng

    # An on-policy update at (2, 1), dp=2, without old log-probs: the weight-sync check
    # (rollout vs actor log-probs) runs on the training forward. The rollout log-probs are
    # HF's exact ones shifted by 0.25 nats.
    tensors = {k: v for k, v in inputs["batch"].items() if k != "old_log_probs"}
    tensors["rollout_log_probs"] = (inputs["hf_log_probs"] + 0.25) * tensors["response_mask"]
    skipped = Batch.from_dict(tensors=tensors, meta={"temperature": 0.7})
    eng = engine(inputs["gqa"], "actor", 2, 1, inputs["optim"])
    metrics = eng.update_actor(my_part(eng, skipped), actor_objective)
    if collector(eng):
        results["sync_check_21"] = metrics
    del eng

    # One critic update at (1, 2) with dp=2 (value head from the critic directory).
    critic_batch = batch.union(Batch.from_dict(tensors=inputs["critic_extra"]))
    eng = engine(inputs["critic"], "critic", 1, 2, inputs["critic_optim"])
    values = eng.compute_values(my_part(eng, critic_batch))["values"]
    metrics = eng.update_critic(
        my_part(eng, critic_batch),
        CriticObjective(value_loss=clipped_value_loss, loss_agg_mode="token-mean"),
    )
    state = eng.full_hf_state()
    if collector(eng):
        results["critic_values_12"] = values
        results["critic_update_12"] = {"state": state, "metrics": metrics}
    del eng
    # A reward model (sequence score head) at (2, 1) with dp=2.
    eng = engine(inputs["score"], "score", 2, 1, inputs["optim"])
    scores = eng.compute_scores(my_part(eng, batch))["rm_scores"]
    if collector(eng):
        results["scores_21"] = scores
    del eng
    torch.save(results, args.out / f"rank{args.rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
