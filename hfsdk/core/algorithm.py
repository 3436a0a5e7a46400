"""Base types for algorithm plugins.

An algorithm is a short single-controller program over worker groups. Its
maths (advantage estimators, losses, KL estimators) are looked up by name in
the registries so any algorithm can select any of them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from hfsdk.core.dataflow import Dataflow

LOSS_AGG_MODES = (
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)
LossAggMode = Literal[
    "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"
]


@attrs.frozen(kw_only=True)
class AlgorithmConfig:
    """Settings every algorithm shares; algorithm plugins subclass it.

    Names (``advantage_estimator``, ``policy_loss``, ``kl_estimator``) are looked
    up in the registries, so any installed estimator or loss can be selected.
    """

    advantage_estimator: str = "gae"
    policy_loss: str = "ppo_clip"
    kl_estimator: str = "k1"
    kl_in_reward: bool = False
    kl_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    kl_controller: Literal["fixed", "adaptive"] = attrs.field(
        default="fixed", validator=attrs.validators.in_(("fixed", "adaptive"))
    )
    target_kl: float = attrs.field(default=0.1, validator=attrs.validators.gt(0.0))
    kl_horizon: int = attrs.field(default=10000, validator=attrs.validators.gt(0))
    kl_loss_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    entropy_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    loss_agg_mode: LossAggMode = attrs.field(
        default="token-mean", validator=attrs.validators.in_(LOSS_AGG_MODES)
    )
    n_samples_per_prompt: int = attrs.field(default=1, validator=attrs.validators.ge(1))


class Algorithm:
    """Base class of an algorithm's single-controller program.

    Subclasses declare ``roles`` (the model roles they need) and ``dataflow``
    (what each role does per stage, read by the placement planner), and
    implement :meth:`step`, which turns one batch of prompts into metrics by
    calling worker groups.
    """

    name: ClassVar[str]
    roles: ClassVar[tuple[str, ...]]
    dataflow: ClassVar[Dataflow]

    def step(self, prompts: Any) -> dict[str, float]:
        """Run one training iteration on a batch of prompts and return metrics."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")
