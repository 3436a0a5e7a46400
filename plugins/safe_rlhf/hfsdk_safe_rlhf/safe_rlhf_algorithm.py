"""Safe-RLHF's single-controller program."""

from __future__ import annotations

from typing import ClassVar

from hfsdk.core.algorithm import Algorithm
from hfsdk.core.dataflow import Dataflow, Stage


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
