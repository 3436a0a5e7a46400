"""Does RL improve the built-in default task quickly? A single-process check per algorithm.

Runs short PPO, GRPO, ReMax and Safe-RLHF loops on the default task with the
fsdp backend's engines and the HF rollout in this one process (no Ray, no
trainer), using the registered maths of each algorithm plugin, and prints
the reward (and cost) curve plus a summary table: the mean of the first and
last five steps and the wall time. This validates the task design and gives
the trainer's default hyperparameters a reference; the real runs go through
``hfsdk run``.

    .venv/bin/python benchmarks/default_task_learnability.py --algo all --steps 30
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs
import torch

import hfsdk
from hfsdk.core.batch import Batch
from hfsdk.core.default_task import (
    DefaultAssets,
    DefaultTaskSpec,
    default_task_cost,
    default_task_reward,
    ensure_default_assets,
    load_prompt_dataset,
)
from hfsdk.core.maths.kl import apply_kl_penalty
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
from hfsdk_backend_fsdp.critic import CriticEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig, HFRolloutConfig, OptimConfig
from hfsdk_backend_fsdp.hf_rollout import HFRollout
from hfsdk_backend_fsdp.objectives import ActorObjective, CriticObjective
from hfsdk_safe_rlhf.advantages import compute_safe_rlhf_terms
from hfsdk_safe_rlhf.cost import apply_kl_to_costs
from hfsdk_safe_rlhf.lagrange import LagrangeConfig, LagrangeMultiplier

ALGOS = ("ppo", "grpo", "remax", "safe_rlhf")


class PromptStream:
    """Endless shuffled batches of the default task's prompts, tokenized and left-padded."""

    def __init__(self, assets: DefaultAssets, tokenizer: Any, batch_size: int, seed: int) -> None:
        self.rows = load_prompt_dataset("train", assets).to_list()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.order: list[int] = []
        self.uid = 0

    def next(self) -> Batch:
        """The next batch of prompts (with ``raw_prompt``, ``uid``, ``answer``)."""
        picked = []
        for _ in range(self.batch_size):
            if not self.order:
                self.order = torch.randperm(len(self.rows), generator=self.generator).tolist()
            picked.append(self.rows[self.order.pop()])
        prompts = [r["prompt"] for r in picked]
        encoded = self.tokenizer(prompts, return_tensors="pt", padding=True)
        uids = list(range(self.uid, self.uid + len(picked)))
        self.uid += len(picked)
        return Batch.from_dict(
            tensors={"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask},
            non_tensors={
                "raw_prompt": prompts,
                "uid": uids,
                "answer": [r["answer"] for r in picked],
            },
        )


def score(batch: Batch, fn: Callable[..., list[float]]) -> torch.Tensor:
    """A rule-based score per response, as a (B,) tensor."""
    values = fn(list(batch["raw_prompt"]), list(batch["response_text"]), answer=batch["answer"])
    return torch.tensor(values, dtype=torch.float32)


def at_last_token(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Token-level scores: each sequence's score on its last response token."""
    token_scores = torch.zeros_like(response_mask)
    last = response_mask.long().sum(dim=-1).clamp(min=1) - 1
    token_scores[torch.arange(len(scores)), last] = scores
    return token_scores


def registered(kind: str, name: str) -> Callable[..., Any]:
    """An implementation from the registries, as the algorithms look them up."""
    return hfsdk.get_registry(kind).get(name).impl


def run(algo: str, args: argparse.Namespace, assets: DefaultAssets) -> dict[str, Any]:
    """Train ``algo`` for ``args.steps`` steps; return the per-step curves and wall time."""
    ppo_clip_loss = registered("policy_losses", "ppo_clip")
    clipped_value_loss = registered("value_losses", "clipped")
    compute_grpo_advantages = registered("advantage_estimators", "grpo")
    compute_gae = registered("advantage_estimators", "gae")
    compute_remax_advantages = registered("advantage_estimators", "remax")
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    n = args.n if algo == "grpo" else 1
    responses_per_step = args.batch_size * n
    role = functools.partial(
        FSDPRoleConfig,
        model_path=str(assets.model_dir),
        mini_batch_size=max(1, responses_per_step // args.minibatches),
        micro_batch_size=responses_per_step,
    )
    actor = ActorEngine(role(optim=OptimConfig(lr=args.lr)), role="actor")
    reference = ReferenceEngine(role(), role="reference")
    critic_optim = OptimConfig(lr=args.critic_lr)
    critics = {}
    if algo == "ppo":
        critics["values"] = CriticEngine(role(optim=critic_optim), role="critic")
    if algo == "safe_rlhf":
        critics["values"] = CriticEngine(role(optim=critic_optim), role="reward_critic")
        critics["cost_values"] = CriticEngine(role(optim=critic_optim), role="cost_critic")
    rollout = HFRollout(HFRolloutConfig(max_response_length=8, n=n), actor)
    prompts = PromptStream(assets, actor.tokenizer, args.batch_size, args.seed)
    objective = ActorObjective(
        policy_loss=ppo_clip_loss,
        kl_estimator="k3" if algo == "grpo" else None,
        kl_loss_coef=0.01 if algo == "grpo" else 0.0,
    )
    critic_objective = CriticObjective(value_loss=clipped_value_loss)
    multiplier = LagrangeMultiplier(
        LagrangeConfig(
            cost_threshold=args.cost_threshold, lambda_init=1.0, lambda_lr=args.lambda_lr
        )
    )
    kl_coef = {"ppo": 0.05, "remax": 0.01, "safe_rlhf": 0.02}.get(algo, 0.0)
    curve: list[dict[str, float]] = []
    for step in range(args.steps):
        batch = rollout.generate_sequences(prompts.next())
        batch = batch.union(actor.compute_log_prob(batch))
        batch = batch.union(reference.compute_ref_log_prob(batch))
        for key, critic in critics.items():
            batch[key] = critic.compute_values(batch)["values"]
        mask = batch["response_mask"]
        rewards = score(batch, default_task_reward)
        costs = score(batch, default_task_cost)
        scores = at_last_token(rewards, mask)
        if kl_coef > 0:
            token_rewards, _ = apply_kl_penalty(
                scores, batch["old_log_probs"], batch["ref_log_probs"], mask, kl_coef
            )
        else:
            token_rewards = scores
        extra: dict[str, float] = {}
        if algo == "grpo":
            advantages, returns = compute_grpo_advantages(
                token_level_rewards=token_rewards,
                response_mask=mask,
                group_index=list(batch["uid"]),
            )
        elif algo == "ppo":
            advantages, returns = compute_gae(
                token_level_rewards=token_rewards, response_mask=mask, values=batch["values"]
            )
        elif algo == "remax":
            greedy = rollout.generate_sequences(_prompts_of(batch), greedy=True)
            baselines = score(greedy, default_task_reward)
            advantages, returns = compute_remax_advantages(
                token_level_rewards=token_rewards, response_mask=mask, reward_baselines=baselines
            )
        else:
            token_costs, _ = apply_kl_to_costs(
                at_last_token(costs, mask),
                batch["old_log_probs"],
                batch["ref_log_probs"],
                mask,
                kl_coef,
            )
            terms = compute_safe_rlhf_terms(
                token_level_rewards=token_rewards,
                token_level_costs=token_costs,
                values=batch["values"],
                cost_values=batch["cost_values"],
                response_mask=mask,
                lagrange_multiplier=multiplier.value,
            )
            advantages, returns = terms.advantages, terms.returns
            extra = multiplier.update(costs)
        batch["advantages"] = advantages
        batch["returns"] = returns
        if algo == "safe_rlhf":
            critics["values"].update_critic(batch, critic_objective)
            cost_batch = batch.select(
                [*(k for k in batch.tensor_keys if k not in ("values", "returns"))], [], []
            )
            cost_batch["values"] = batch["cost_values"]
            cost_batch["returns"] = terms.cost_returns
            critics["cost_values"].update_critic(cost_batch, critic_objective)
        elif algo == "ppo":
            critics["values"].update_critic(batch, critic_objective)
        actor_metrics = actor.update_actor(batch, objective)
        curve.append(
            {
                "reward": float(rewards.mean()),
                "cost": float(costs.mean()),
                "length": float(mask.sum(dim=-1).mean()),
                "kl": actor_metrics.get("actor/kl", 0.0),
                "lambda": extra.get("lagrange/lambda", 0.0),
            }
        )
        if not args.quiet:
            point = curve[-1]
            print(
                f"{algo:>9} step {step:3d} reward {point['reward']:.3f} cost {point['cost']:.3f} "
                f"len {point['length']:.2f} kl {point['kl']:+.4f} lambda {point['lambda']:.3f} "
                f"t {time.perf_counter() - started:6.1f}s",
                flush=True,
            )
    return {"curve": curve, "seconds": time.perf_counter() - started}


def _prompts_of(batch: Batch) -> Batch:
    """The prompt batch behind a rollout batch (for ReMax's greedy baseline on the same prompts)."""
    mask = batch["attention_mask"][:, : batch["prompts"].shape[1]]
    return Batch.from_dict(
        tensors={"input_ids": batch["prompts"], "attention_mask": mask},
        non_tensors={k: batch[k] for k in ("raw_prompt", "uid", "answer")},
    )


def main() -> None:
    """Parse arguments, run the chosen algorithms and print the summary table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="all", choices=(*ALGOS, "all"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=16, help="prompts per step")
    parser.add_argument("--n", type=int, default=4, help="GRPO samples per prompt")
    parser.add_argument("--minibatches", type=int, default=2, help="optimizer steps per step")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--critic-lr", type=float, default=1e-3)
    parser.add_argument("--cost-threshold", type=float, default=0.1)
    parser.add_argument("--lambda-lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--spec", default="", help="JSON of DefaultTaskSpec fields to change")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec = DefaultTaskSpec()
    if args.spec:
        spec = attrs.evolve(spec, **json.loads(args.spec))
    assets = ensure_default_assets(spec)
    results = {}
    for algo in ALGOS if args.algo == "all" else (args.algo,):
        results[algo] = run(algo, args, assets)
    print()
    columns = ("algorithm", "reward first 5", "reward last 5", "gain")
    columns += ("cost first 5", "cost last 5", "wall s")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for algo, result in results.items():
        curve = result["curve"]
        first = statistics.mean(p["reward"] for p in curve[:5])
        last = statistics.mean(p["reward"] for p in curve[-5:])
        cost_first = statistics.mean(p["cost"] for p in curve[:5])
        cost_last = statistics.mean(p["cost"] for p in curve[-5:])
        print(
            f"| {algo} | {first:.3f} | {last:.3f} | {last - first:+.3f} | {cost_first:.3f} | "
            f"{cost_last:.3f} | {result['seconds']:.1f} |"
        )


if __name__ == "__main__":
    main()
