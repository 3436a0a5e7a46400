"""PPO's single-controller program."""

from __future__ import annotations

from typing import ClassVar

from hfsdk.core.algorithm import Algorithm
from hfsdk.core.dataflow import Dataflow, Stage


class PPOAlgorithm(Algorithm):
    """PPO: generate, score, GAE, then update the critic and the actor."""

    name: ClassVar[str] = "ppo"
    roles: ClassVar[tuple[str, ...]] = ("actor", "critic", "reference", "reward")
    dataflow: ClassVar[Dataflow] = Dataflow(
        roles=roles,
        stages=(
            Stage(name="generation", work=(("actor", "generation"),)),
            Stage(
                name="preparation",
                work=(
                    ("actor", "inference"),
                    ("critic", "inference"),
                    ("reference", "inference"),
                    ("reward", "inference"),
                ),
            ),
            Stage(name="training", work=(("actor", "training"), ("critic", "training"))),
        ),
    )
