"""ReMax's single-controller program."""

from __future__ import annotations

from typing import ClassVar

from hfsdk.core.algorithm import Algorithm
from hfsdk.core.dataflow import Dataflow, Stage


class ReMaxAlgorithm(Algorithm):
    """ReMax: a sampled and a greedy generation; the greedy reward is the baseline."""

    name: ClassVar[str] = "remax"
    roles: ClassVar[tuple[str, ...]] = ("actor", "reference", "reward")
    dataflow: ClassVar[Dataflow] = Dataflow(
        roles=roles,
        stages=(
            Stage(name="generation", work=(("actor", "generation"),)),
            Stage(name="greedy_generation", work=(("actor", "generation"),)),
            Stage(
                name="preparation",
                work=(("actor", "inference"), ("reference", "inference"), ("reward", "inference")),
            ),
            Stage(name="training", work=(("actor", "training"),)),
        ),
    )
