"""The ``reinforce_mean`` program: sample, score, KL-in-reward, batch-mean baseline, update."""

from __future__ import annotations

import attrs

from hfsdk import Algorithm, AlgorithmConfig, Batch, help_field


@attrs.frozen(kw_only=True)
class ReinforceMeanConfig(AlgorithmConfig):
    """REINFORCE with the batch's mean score as baseline; KL to the reference in the reward."""

    advantage_estimator: str = "batch_mean"
    policy_loss: str = "ppo_clip"
    kl_in_reward: bool = True
    kl_coef: float = attrs.field(default=0.01, validator=attrs.validators.ge(0.0))
    log_baseline: bool = help_field(
        "Record the batch-mean baseline as reinforce_mean/baseline each step.", default=True
    )


class ReinforceMeanAlgorithm(Algorithm):
    """REINFORCE with a batch-mean baseline: no critic, one reference, one reward."""

    def step(self, prompts: Batch) -> dict[str, float]:
        """sample → log-probs → ref → reward → KL-in-reward → batch-mean advantages → actor."""
        batch = self.rollout(prompts)
        with self.stage("reward"):
            batch["token_level_scores"] = self.score(batch, "reward")
        with self.stage("advantages"):
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            result = self.estimate_advantages(batch)
            if self.algo_config.log_baseline and "baseline" in result.extras:
                self.metrics["reinforce_mean/baseline"] = float(result.extras["baseline"])
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        return self.finish(batch)
