"""ReMax's single-controller program."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfsdk import Algorithm, last_segments

if TYPE_CHECKING:
    from hfsdk import Batch


class ReMaxAlgorithm(Algorithm):
    """ReMax: a sampled and a greedy generation; the greedy reward is the baseline."""

    def step(self, prompts: Batch) -> dict[str, float]:
        """Sampled and greedy generations; the greedy response's reward is the baseline."""
        batch = self.rollout(prompts)
        with self.stage("greedy_generation"):
            greedy = self.generate(prompts, n=1, greedy=True)
        with self.stage("reward"):
            batch["token_level_scores"] = self.score(batch, "reward")
            # One score per trajectory (a multi-turn greedy rollout may return segments).
            baseline, _ = self.context.signals["reward"](last_segments(greedy))  # not logged
            self.metrics["reward/greedy_baseline_mean"] = float(baseline.mean())
        with self.stage("advantages"):
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            n = self.algo_config.n_samples_per_prompt
            self.estimate_advantages(batch, reward_baselines=baseline.repeat_interleave(n))
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        return self.finish(batch)
