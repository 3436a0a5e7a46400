"""The Safe-RLHF Lagrange multiplier λ (checkpointable).

λ = exp(log λ) stays positive. After each step the episode costs of the
batch join a window of the most recent ``episode_cost_window`` costs, and,
once ``lambda_update_delay`` steps have passed, log λ takes one gradient
descent step on the multiplier loss::

    L(log λ) = −(J_c − d) · λ,   J_c = mean cost over the window, d = cost_threshold
    log λ ← log λ − lr · ∂L/∂log λ = log λ + lr · (J_c − d) · λ

so λ grows while the constraint J_c ≤ d is violated and shrinks otherwise;
``lambda_max`` caps it. λ is consumed in float32, so a log λ above float32's
largest value stops the update with an error, and log λ is floored at float32's
epsilon so that one step down from a huge λ cannot leave λ at exactly 0 for good.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import torch

from hfsdk import HfsdkError

# λ weights float32 advantages: beyond float32's largest value it overflows them.
_LOG_LARGEST = math.log(torch.finfo(torch.float32).max)
# The step on log λ is lr·(J_c − d)·λ, so a huge λ under budget jumps log λ to −huge and λ
# to exactly 0, where no later violation can move it. Below float32's epsilon the cost term
# is lost next to the reward term of the advantage anyway, while a violation still moves
# log λ by more than float64's resolution (unlike at float32's smallest normal, 1e-38).
_LOG_SMALLEST = math.log(torch.finfo(torch.float32).eps)


@attrs.frozen(kw_only=True)
class LagrangeConfig:
    """Settings of the multiplier (same names as in the ``safe_rlhf`` algorithm config)."""

    cost_threshold: float = 0.0
    lambda_init: float = attrs.field(default=1.0, validator=attrs.validators.gt(0.0))
    lambda_lr: float = attrs.field(default=0.1, validator=attrs.validators.gt(0.0))
    lambda_max: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0.0))
    )
    lambda_update_delay: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    episode_cost_window: int = attrs.field(default=16, validator=attrs.validators.ge(1))

    @classmethod
    def from_config(cls, config: Any) -> LagrangeConfig:
        """The multiplier's fields taken from any config that has them (``SafeRLHFConfig``)."""
        return cls(**{f.name: getattr(config, f.name) for f in attrs.fields(cls)})


class LagrangeMultiplier:
    """λ with its update rule and its checkpointable state."""

    def __init__(self, config: LagrangeConfig | None = None) -> None:
        self.config = config or LagrangeConfig()
        if self.config.lambda_max is not None and self.config.lambda_init > self.config.lambda_max:
            raise HfsdkError(
                f"lambda_init={self.config.lambda_init} is above lambda_max="
                f"{self.config.lambda_max}; lower lambda_init or raise lambda_max"
            )
        self.log_lambda = math.log(self.config.lambda_init)
        self.steps = 0
        self.window: deque[float] = deque(maxlen=self.config.episode_cost_window)

    @property
    def value(self) -> float:
        """The current λ = exp(log λ)."""
        return math.exp(self.log_lambda)

    def update(self, episode_costs: Iterable[float] | torch.Tensor) -> dict[str, float]:
        """Record one step's episode costs and move λ (after the delay); return metrics."""
        if isinstance(episode_costs, torch.Tensor):
            episode_costs = episode_costs.detach().flatten().tolist()
        costs = [float(c) for c in episode_costs]
        if not costs:
            raise HfsdkError("episode_costs is empty; expected one cost per episode of the step")
        bad = [i for i, c in enumerate(costs) if not math.isfinite(c)]
        if bad:
            raise HfsdkError(
                f"episode_costs has non-finite values at episodes {bad[:8]}; the cost model "
                "must return finite scores"
            )
        self.window.extend(costs)
        self.steps += 1
        mean_cost = sum(self.window) / len(self.window)
        violation = mean_cost - self.config.cost_threshold
        # The loss is that of the λ being stepped, so read it before log λ moves.
        loss = -violation * self.value
        if self.steps > self.config.lambda_update_delay:
            # The step grows with λ itself, so an uncapped λ under a lasting violation
            # runs away within a few steps: say so instead of overflowing.
            log_lambda = self.log_lambda + self.config.lambda_lr * violation * self.value
            if self.config.lambda_max is not None:
                log_lambda = min(log_lambda, math.log(self.config.lambda_max))
            if not log_lambda < _LOG_LARGEST:
                raise HfsdkError(
                    f"the Lagrange multiplier overflowed (log λ = {log_lambda:.3g}, above "
                    f"float32's {_LOG_LARGEST:.4g}) while the mean episode cost "
                    f"{mean_cost:.3g} exceeds cost_threshold={self.config.cost_threshold}; "
                    "set lambda_max (e.g. 10; at most 3.4e38) or lower "
                    f"lambda_lr={self.config.lambda_lr}"
                )
            # A smaller start or cap lowers the floor: it never lifts λ above either.
            floor = min(_LOG_SMALLEST, math.log(self.config.lambda_init))
            if self.config.lambda_max is not None:
                floor = min(floor, math.log(self.config.lambda_max))
            self.log_lambda = max(log_lambda, floor)
        return {
            "lagrange/lambda": self.value,
            "lagrange/mean_episode_cost": mean_cost,
            "lagrange/constraint_violation": violation,
            "lagrange/loss": loss,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly: log λ, the step count and the cost window."""
        return {"log_lambda": self.log_lambda, "steps": self.steps, "window": list(self.window)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        missing = {"log_lambda", "steps", "window"} - set(state)
        if missing:
            raise HfsdkError(
                f"Lagrange multiplier state lacks {sorted(missing)}; expected the output of "
                "LagrangeMultiplier.state_dict()"
            )
        self.log_lambda = float(state["log_lambda"])
        self.steps = int(state["steps"])
        self.window = deque(
            (float(c) for c in state["window"]), maxlen=self.config.episode_cost_window
        )
