"""GRPO's single-controller program."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfsdk import Algorithm

if TYPE_CHECKING:
    from hfsdk import Batch


class GRPOAlgorithm(Algorithm):
    """GRPO: n samples per prompt, group-normalised rewards, no critic."""

    def step(self, prompts: Batch) -> dict[str, float]:
        """n samples per prompt → log-probs → ref → reward → group advantages → actor (KL loss)."""
        batch = self.rollout(prompts)
        with self.stage("reward"):
            batch["token_level_scores"] = self.score(batch, "reward")
        with self.stage("advantages"):
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            self.estimate_advantages(batch)
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        return self.finish(batch)
