"""DAPO's single-controller program: GRPO's step with dynamic sampling and overlong shaping."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hfsdk import Algorithm
from hfsdk_dapo.dynamic_sampling import informative_groups, rows_of

if TYPE_CHECKING:
    from hfsdk import Batch
    from hfsdk_dapo.dapo_config import DAPOConfig


class DAPOAlgorithm(Algorithm):
    """Sample → score (+ overlong shaping) → keep informative groups, draw more → log-probs →
    group advantages → actor update (token-mean, clip-higher, no KL)."""

    algo_config: DAPOConfig

    def step(self, prompts: Batch) -> dict[str, float]:
        """One DAPO iteration on ``prompts`` (and whatever dynamic sampling draws more)."""
        batch = self._sample_informative(prompts)
        if self.needs_old_log_probs(len(batch)):
            (old,) = self.concurrently(batch, [("old_log_prob", self.actor.compute_log_prob)])
            batch = batch.union(old)
        with self.stage("advantages"):
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            self.estimate_advantages(batch)
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        return self.finish(batch)

    def _scored(self, prompts: Batch, round_index: int) -> Batch:
        """Rollouts of ``prompts`` with their (shaped) token-level scores."""
        import torch  # here: registering the algorithm must not import torch

        from hfsdk_dapo.overlong import overlong_penalty
        from hfsdk_dapo.padding import left_pad

        width = self.config.rollout.max_prompt_length
        prompts = left_pad(prompts, width)  # every round's rollouts concatenate
        # Group ids unique within the step: a prompt drawn again after an epoch wraps
        # is a group of its own.
        prompts["uid"] = [f"{round_index}:{u}" for u in prompts["uid"]]
        with self.stage("generation"):
            batch = self.generate(prompts)
        with self.stage("reward"):
            scores = self.score(batch, "reward")
            cfg = self.algo_config
            if cfg.overlong_buffer_len:
                lengths = batch["response_mask"].sum(-1)
                penalty = overlong_penalty(
                    lengths,
                    self.config.rollout.max_response_length,
                    cfg.overlong_buffer_len,
                    cfg.overlong_penalty_factor,
                )
                last = (lengths.long() - 1).clamp(min=0)
                scores = scores.clone()
                scores[torch.arange(len(batch)), last] += penalty.to(scores.dtype)
                self.metrics["overlong/penalty_mean"] = float(penalty.mean())
            batch["token_level_scores"] = scores
        return batch

    def _sample_informative(self, prompts: Batch) -> Batch:
        """The step's batch: only groups that disagree, refilled from the prompt stream."""
        cfg = self.algo_config
        target = len(prompts)
        batch = self._scored(prompts, 0)
        # The policy's reward on the prompts as drawn (reward/mean is the kept groups').
        first = batch["token_level_scores"].sum(-1)
        self.metrics["dynamic_sampling/reward_before_filter"] = float(first.mean())
        stats: dict[str, Any] = {"drawn": target, "dropped": 0, "rounds": 1}
        if not cfg.dynamic_sampling:
            self._record_sampling(stats, target, target)
            return batch
        kept: list[Batch] = []
        groups = 0
        while True:
            with self.stage("dynamic_sampling"):
                ids = list(batch["uid"])
                sequence_scores = batch["token_level_scores"].sum(-1).tolist()
                keep = informative_groups(ids, sequence_scores)
                stats["dropped"] += len(set(ids)) - len(keep)
                keep = keep[: target - groups]
                if keep:
                    kept.append(batch.index(rows_of(ids, keep)))
                    groups += len(keep)
            if groups >= target or stats["rounds"] >= cfg.max_generation_rounds:
                break
            more = self.prompts.next_batch(len(prompts))
            stats["drawn"] += len(more)
            batch = self._scored(more, stats["rounds"])
            stats["rounds"] += 1
        self._record_sampling(stats, groups, target)
        from hfsdk import Batch

        # No group disagreed in any round: train on the last one (its advantages are 0).
        return Batch.concat(kept) if kept else batch

    def _record_sampling(self, stats: dict[str, Any], groups: int, target: int) -> None:
        self.metrics["dynamic_sampling/prompts_drawn"] = float(stats["drawn"])
        self.metrics["dynamic_sampling/groups_dropped"] = float(stats["dropped"])
        self.metrics["dynamic_sampling/generation_rounds"] = float(stats["rounds"])
        self.metrics["dynamic_sampling/groups_kept"] = float(groups)
        self.metrics["dynamic_sampling/batch_filled"] = groups / target
