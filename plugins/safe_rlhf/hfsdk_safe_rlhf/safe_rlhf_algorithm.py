"""Safe-RLHF's single-controller program."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from hfsdk.core.algorithm import Algorithm, AlgorithmContext
from hfsdk.core.dataflow import Dataflow, Stage

if TYPE_CHECKING:
    from hfsdk.core.batch import Batch


class SafeRLHFAlgorithm(Algorithm):
    """Safe-RLHF: PPO with a reward critic, a cost critic and a Lagrange multiplier."""

    name: ClassVar[str] = "safe_rlhf"
    roles: ClassVar[tuple[str, ...]] = (
        "actor",
        "critic",
        "cost_critic",
        "reference",
        "reward",
        "cost",
    )
    dataflow: ClassVar[Dataflow] = Dataflow(
        roles=roles,
        stages=(
            Stage(name="generation", work=(("actor", "generation"),)),
            Stage(
                name="preparation",
                work=(
                    ("actor", "inference"),
                    ("critic", "inference"),
                    ("cost_critic", "inference"),
                    ("reference", "inference"),
                    ("reward", "inference"),
                    ("cost", "inference"),
                ),
            ),
            Stage(
                name="training",
                work=(("actor", "training"), ("critic", "training"), ("cost_critic", "training")),
            ),
        ),
    )

    def __init__(self, context: AlgorithmContext) -> None:
        super().__init__(context)
        from hfsdk_safe_rlhf.lagrange import LagrangeConfig, LagrangeMultiplier

        self.multiplier = LagrangeMultiplier(LagrangeConfig.from_config(self.algo_config))

    def needs_old_log_probs(self, samples: int) -> bool:
        """Always: the KL term of the costs reads the sampling policy's log-probs."""
        return True

    def step(self, prompts: Batch) -> dict[str, float]:
        """PPO with a reward and a cost signal, two critics and the multiplier λ."""
        from hfsdk_ppo.advantages import gae_advantages_and_returns
        from hfsdk_safe_rlhf.cost import apply_kl_to_costs

        critic, cost_critic = self.role("critic"), self.role("cost_critic")
        batch = self.rollout(prompts)
        with self.stage("values"):
            batch = batch.union(critic.compute_values(batch))
            batch["cost_values"] = cost_critic.compute_values(batch)["values"]
        with self.stage("reward"):
            batch["token_level_scores"] = self.score(batch, "reward")
        with self.stage("cost"):
            batch["token_level_cost_scores"] = self.score(batch, "cost")
        with self.stage("advantages"):
            self.record(self.multiplier.update(batch["token_level_cost_scores"].sum(dim=-1)))
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            costs, kl_metrics = apply_kl_to_costs(
                batch["token_level_cost_scores"],
                batch["old_log_probs"],
                batch["ref_log_probs"],
                batch["response_mask"],
                self.kl_controller.value if self.algo_config.kl_in_reward else 0.0,
                self.algo_config.kl_estimator,
            )
            self.record(kl_metrics, "cost/")
            self.estimate_advantages(
                batch,
                token_level_costs=costs,
                cost_values=batch["cost_values"],
                lagrange_multiplier=self.multiplier.value,
            )
            gamma = getattr(self.config.advantage, "gamma", 1.0)
            lam = getattr(self.config.advantage, "lam", 0.95)
            _, cost_returns = gae_advantages_and_returns(
                costs, batch["cost_values"], batch["response_mask"], gamma, lam
            )
        with self.stage("update_critic"):
            self.record(critic.update_critic(batch))
            cost_view = batch.select(
                tensor_keys=[
                    "input_ids",
                    "attention_mask",
                    "position_ids",
                    "responses",
                    "response_mask",
                    "prompts",
                ],
                non_tensor_keys=[],
            )
            cost_view["values"] = batch["cost_values"]
            cost_view["returns"] = cost_returns
            self.record({f"cost_{k}": v for k, v in cost_critic.update_critic(cost_view).items()})
        with self.stage("update_actor"):
            self.record(self.role("actor").update_actor(batch))
        self.metrics["lagrange/lambda"] = self.multiplier.value
        return self.finish(batch)

    def state_dict(self) -> dict[str, Any]:
        """KL controller plus the multiplier's state."""
        return {**super().state_dict(), "multiplier": self.multiplier.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore both."""
        super().load_state_dict(state)
        self.multiplier.load_state_dict(state["multiplier"])
