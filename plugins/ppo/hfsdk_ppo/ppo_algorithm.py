"""PPO's single-controller program."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfsdk import Algorithm

if TYPE_CHECKING:
    from hfsdk import Batch


class PPOAlgorithm(Algorithm):
    """PPO: generate, score, GAE, then update the critic and the actor."""

    def step(self, prompts: Batch) -> dict[str, float]:
        """generate → log-probs → ref → values → reward → KL-in-reward → GAE → critic → actor."""
        critic = self.role("critic")
        # The critic's values need only the samples: they run beside the log-prob passes.
        batch = self.rollout(prompts, also=[("values", critic.compute_values)])
        with self.stage("reward"):
            batch["token_level_scores"] = self.score(batch, "reward")
        with self.stage("advantages"):
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            self.estimate_advantages(batch)
        with self.stage("update_critic"):
            self.record(critic.update_critic(batch))
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        return self.finish(batch)
