"""Safe-RLHF's single-controller program."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hfsdk import Algorithm, AlgorithmContext, HfsdkError

if TYPE_CHECKING:
    from hfsdk import Batch


class SafeRLHFAlgorithm(Algorithm):
    """Safe-RLHF: PPO with a reward critic, a cost critic and a Lagrange multiplier."""

    def __init__(self, context: AlgorithmContext) -> None:
        super().__init__(context)
        from hfsdk_safe_rlhf.lagrange import LagrangeConfig, LagrangeMultiplier

        self.multiplier = LagrangeMultiplier(LagrangeConfig.from_config(self.algo_config))

    def needs_old_log_probs(self, samples: int) -> bool:
        """Always: the KL term of the costs reads the sampling policy's log-probs."""
        return True

    def step(self, prompts: Batch) -> dict[str, float]:
        """PPO with a reward and a cost signal, two critics and the multiplier λ."""
        from hfsdk_safe_rlhf.cost import apply_kl_to_costs

        critic, cost_critic = self.role("critic"), self.role("cost_critic")
        batch = self.rollout(prompts)
        # Both critics read only the samples: their passes overlap when on different pools.
        values, cost_values = self.concurrently(
            batch, [("values", critic.compute_values), ("values", cost_critic.compute_values)]
        )
        batch = batch.union(values)
        batch["cost_values"] = cost_values["values"]
        with self.stage("reward"):
            batch["token_level_scores"] = self.score(batch, "reward")
        with self.stage("cost"):
            batch["token_level_cost_scores"] = self.score(batch, "cost")
        with self.stage("advantages"):
            self.record(self.multiplier.update(batch["token_level_cost_scores"].sum(dim=-1)))
            # One β for both signals of this step: read it before rewards_with_kl lets the
            # adaptive controller move it (the next step gets the moved value).
            kl_coef = self.kl_controller.value if self.algo_config.kl_in_reward else 0.0
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            costs, kl_metrics = apply_kl_to_costs(
                batch["token_level_cost_scores"],
                batch["old_log_probs"],
                batch["ref_log_probs"],
                batch["response_mask"],
                kl_coef,
                self.algo_config.kl_estimator,
            )
            self.record(kl_metrics, "cost/")
            # One estimation gives both critics' targets: the reward returns go into the
            # batch, the cost returns (same γ, λ, from the cost critic's values) come back
            # in the result's extras.
            result = self.estimate_advantages(
                batch,
                token_level_costs=costs,
                cost_values=batch["cost_values"],
                lagrange_multiplier=self.multiplier.value,
            )
            cost_returns = result.extras.get("cost_returns")
            if cost_returns is None:
                raise HfsdkError(
                    f"advantage estimator {self.algo_config.advantage_estimator!r} returned no "
                    "extras['cost_returns'], which the cost critic trains on; use 'safe_rlhf'"
                )
            batch["cost_returns"] = cost_returns  # kept with the batch: replay_update needs it
        with self.stage("update_critic"):
            self.record(critic.update_critic(batch))
            self.record(
                {f"cost_{k}": v for k, v in cost_critic.update_critic(_cost_view(batch)).items()}
            )
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        self.metrics["lagrange/lambda"] = self.multiplier.value
        return self.finish(batch)

    def replay_update(self, batch: Batch) -> dict[str, float]:
        """The step's three updates again (``hfsdk replay``): the reward critic, the cost
        critic on its own values and returns, then the actor."""
        metrics = dict(self.role("critic").update_critic(batch))
        cost = self.role("cost_critic").update_critic(_cost_view(batch))
        metrics.update({f"cost_{k}": v for k, v in cost.items()})
        metrics.update(self.actor.update_actor(batch))
        return {key: float(value) for key, value in metrics.items()}

    def state_dict(self) -> dict[str, Any]:
        """KL controller plus the multiplier's state."""
        return {**super().state_dict(), "multiplier": self.multiplier.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore both."""
        super().load_state_dict(state)
        self.multiplier.load_state_dict(state["multiplier"])


def _cost_view(batch: Batch) -> Batch:
    """What the cost critic trains on: the samples with the cost values and cost returns."""
    view = batch.select(
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
    view["values"] = batch["cost_values"]
    view["returns"] = batch["cost_returns"]
    return view
