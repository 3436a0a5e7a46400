"""The Bradley-Terry loss of a reward (or cost) model on interleaved preference pairs.

With ``r_c``, ``r_r`` the scores of a pair's preferred and other response::

    ℓ = −log σ(r_c − r_r − m) + κ · (r_c + r_r)²

``m`` a fixed margin (0: plain Bradley-Terry), ``κ`` the reward-centring
coefficient (Eisenstein et al., 2023; TRL's ``center_rewards_coefficient``),
which pins the scores' scale without changing which response wins. Metrics per
pair: ``accuracy`` (1 when r_c > r_r), ``margin`` (r_chosen − r_rejected of the data's
columns, also for a cost model) and both columns' scores.
"""

from __future__ import annotations

from typing import Literal

import attrs
import torch
from torch.nn import functional

from hfsdk import Batch, HfsdkError


@attrs.frozen(kw_only=True)
class BradleyTerryLoss:
    """``loss(scores, micro) -> (per-pair losses, per-pair metrics)`` (a ``score_objective``).

    ``higher``: which response of a pair should score higher — ``chosen`` for a
    reward model; ``rejected`` trains a cost model on data whose ``chosen`` is
    the safer response.
    """

    margin: float = 0.0
    center_coef: float = 0.0
    higher: Literal["chosen", "rejected"] = "chosen"

    def __call__(
        self, scores: torch.Tensor, micro: Batch
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Per-pair loss (P,) and metrics of the micro-batch's ``2P`` interleaved rows."""
        flags = micro["chosen"]
        if len(scores) % 2 or not (bool(flags[0::2].all()) and not bool(flags[1::2].any())):
            raise HfsdkError(
                "the Bradley-Terry loss needs interleaved preference pairs (chosen, rejected, "
                "chosen, ...); build the batch with hfsdk_supervised_data.collate_preference_pairs"
            )
        chosen, rejected = scores[0::2], scores[1::2]
        preferred, other = (rejected, chosen) if self.higher == "rejected" else (chosen, rejected)
        diff = preferred - other
        loss = -functional.logsigmoid(diff - self.margin)
        if self.center_coef:
            loss = loss + self.center_coef * (chosen + rejected) ** 2
        # The scores and margin are the data's chosen/rejected rows' (a cost model's margin is
        # then negative when it ranks right); accuracy counts the preferred side scoring higher.
        return loss, {
            "accuracy": (diff.detach() > 0).float(),
            "margin": (chosen - rejected).detach(),
            "chosen_score": chosen.detach(),
            "rejected_score": rejected.detach(),
        }


def pair_metrics(scores: torch.Tensor, higher: str = "chosen") -> dict[str, float]:
    """Pairwise accuracy (the ``higher`` side scored higher), mean margin (chosen − rejected)
    and both rows' mean scores of interleaved pair scores (validation)."""
    chosen, rejected = scores[0::2].float(), scores[1::2].float()
    diff = chosen - rejected
    ranked_right = diff < 0 if higher == "rejected" else diff > 0
    return {
        "pairwise_accuracy": float(ranked_right.float().mean()),
        "margin_mean": float(diff.mean()),
        "chosen_score_mean": float(chosen.mean()),
        "rejected_score_mean": float(rejected.mean()),
    }
