"""GRPO's single-controller program."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from hfsdk.core.algorithm import Algorithm
from hfsdk.core.dataflow import Dataflow, Stage

if TYPE_CHECKING:
    from hfsdk.core.batch import Batch


class GRPOAlgorithm(Algorithm):
    """GRPO: n samples per prompt, group-normalised rewards, no critic."""

    name: ClassVar[str] = "grpo"
    roles: ClassVar[tuple[str, ...]] = ("actor", "reference", "reward")
    dataflow: ClassVar[Dataflow] = Dataflow(
        roles=roles,
        stages=(
            Stage(name="generation", work=(("actor", "generation"),)),
            Stage(
                name="preparation",
                work=(("actor", "inference"), ("reference", "inference"), ("reward", "inference")),
            ),
            Stage(name="training", work=(("actor", "training"),)),
        ),
    )

    def step(self, prompts: Batch) -> dict[str, float]:
        """n samples per prompt → log-probs → ref → reward → group advantages → actor (KL loss)."""
        batch = self.rollout(prompts)
        with self.stage("reward"):
            batch["token_level_scores"] = self.score(batch, "reward")
        with self.stage("advantages"):
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            self.estimate_advantages(batch)
        with self.stage("update_actor"):
            self.record(self.role("actor").update_actor(batch))
        return self.finish(batch)
