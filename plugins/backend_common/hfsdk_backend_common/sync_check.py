"""When the actor's update may skip the old log-probs, and the weight-sync check it keeps.

An update that is one epoch of one mini-batch takes one optimizer step, so the
sampling policy is the current one and the detached log-probs of the
training forward stand in for the old log-probs (ratio 1) — but only if that
forward computes what an eval-mode forward would. Dropout breaks it: the
training forward is a noisy draw, the full path's ratio
``exp(log π_dropout − log π_eval)`` is not 1, and the gradients differ. So
the skip is taken only without dropout (:func:`model_has_dropout`).

Skipping the old log-probs also removes what ``rollout/log_prob_diff_*`` (the
controller's check that a separate rollout engine such as vLLM generated with
the current weights) compares against. :class:`RolloutSyncCheck` computes the
same metrics inside the update from the log-probs it computes anyway: the
training forward's before the first optimizer step, or the old log-probs the
engine computed itself.
"""

from __future__ import annotations

import numbers

import torch

from hfsdk import Batch

ROLLOUT_LOG_PROBS = "rollout_log_probs"
DIFF_MAX, DIFF_MEAN = "rollout/log_prob_diff_max", "rollout/log_prob_diff_mean"


def _dropout_rate(name: str, value: object) -> float:
    named = "dropout" in name or name.endswith("pdrop")
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    return float(value) if named and ok else 0.0


def model_has_dropout(module: torch.nn.Module) -> bool:
    """Whether a training-mode forward of ``module`` drops anything at random.

    Looks at ``nn.Dropout`` layers and at the dropout rates modules keep as
    plain attributes (HF attention passes ``self.attention_dropout`` to the
    attention function instead of holding a layer), and at an HF model's
    config values (``attention_dropout``, ``hidden_dropout``, ``resid_pdrop``...).
    """
    for sub in module.modules():
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd) and sub.p > 0:
            return True
        for name, value in vars(sub).items():
            if _dropout_rate(name, value) > 0:
                return True
    config = vars(module).get("config")
    if config is not None and hasattr(config, "to_dict"):
        return any(_dropout_rate(k, v) > 0 for k, v in config.to_dict().items())
    return False


class RolloutSyncCheck:
    """``rollout/log_prob_diff_max`` / ``_mean`` computed inside an update (see module doc).

    :meth:`for_update` returns ``None`` unless the batch carries the rollout
    engine's log-probs and no old log-probs (the controller then has nothing
    to compare with). The values are this rank's max and token mean of
    ``|rollout − actor|`` over the valid tokens it saw; the update's metrics
    average them over data-parallel ranks.
    """

    def __init__(self) -> None:
        self.max = 0.0
        self.total = 0.0
        self.tokens = 0

    @classmethod
    def for_update(cls, batch: Batch) -> RolloutSyncCheck | None:
        """A check for an update of ``batch``, or ``None`` when the controller checks itself."""
        if ROLLOUT_LOG_PROBS in batch and "old_log_probs" not in batch:
            return cls()
        return None

    def observe(self, rows: Batch, log_probs: torch.Tensor) -> None:
        """Compare ``rows``' rollout log-probs with the actor's ``log_probs`` (B, R) of them."""
        mask = rows["response_mask"].to(log_probs.device).bool()
        rollout = rows[ROLLOUT_LOG_PROBS].to(log_probs.device, torch.float32)
        gap = (rollout - log_probs.detach().float()).abs()[mask]
        if gap.numel():
            self.max = max(self.max, float(gap.max()))
            self.total += float(gap.sum())
            self.tokens += int(gap.numel())

    def metrics(self) -> dict[str, float]:
        """The two metrics (empty when no valid token was observed)."""
        if not self.tokens:
            return {}
        return {DIFF_MAX: self.max, DIFF_MEAN: self.total / self.tokens}
