"""GRPO's single-controller program."""

from __future__ import annotations

from typing import ClassVar

from hfsdk.core.algorithm import Algorithm
from hfsdk.core.dataflow import Dataflow, Stage


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
