"""The sigmoid DPO loss (Rafailov et al., 2023) as a registered policy loss.

The program hands every training backend's ``update_actor`` a batch of
interleaved preference pairs (row ``2i`` chosen, ``2i + 1`` rejected; the
batch's ``hfsdk.ROW_GROUP`` is 2, so mini- and micro-batches keep pairs whole)
with the policy-loss arguments read as:

- ``log_prob``: the policy's per-token log-probs of each response;
- ``old_log_prob``: the frozen **reference**'s (the policy the log-ratio is
  taken against: DPO's implicit reward is ``β·log π/π_ref``);
- ``advantages``: the preference label on every response token, ``+1`` on the
  chosen row and ``−1`` on the rejected one.

Per pair, with ``r = β·Σ_t (log π − log π_ref)`` over the response tokens:
``z = r_chosen − r_rejected`` and ``ℓ = −(1 − ε)·log σ(z) − ε·log σ(−z)``
(``ε``: label smoothing, 0 for plain DPO). The loss is the mean of ``ℓ`` over
the mini-batch's pairs on every rank: each micro-batch adds its pairs' sum
divided by the global pair count (half the global sequence count), times the
data-parallel size that the gradient average divides out again. A pair with no
response tokens in either row (the training dispatch's padding, whose mask is
zeroed) is left out of the loss, the metrics and that count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hfsdk import HfsdkError, check_token_tensors, help_field, masked_fill_zero

if TYPE_CHECKING:
    import torch

    from hfsdk import LossAggregation


@attrs.frozen(kw_only=True)
class DPOLossConfig:
    """Settings of the ``dpo`` loss (the ``policy_loss`` section)."""

    beta: float = help_field(
        "β: the strength of the implicit KL to the reference (larger keeps the policy closer; "
        "the implicit reward is β·log π/π_ref).",
        default=0.1,
        validator=attrs.validators.gt(0.0),
    )
    label_smoothing: float = help_field(
        "ε: the assumed share of flipped labels (conservative DPO); 0 is plain DPO.",
        default=0.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.lt(0.5)],
    )


def pair_rewards(
    log_prob: torch.Tensor, ref_log_prob: torch.Tensor, response_mask: torch.Tensor, beta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The implicit rewards ``β·Σ_t (log π − log π_ref)`` of the chosen and the rejected rows."""
    ratio = masked_fill_zero(log_prob - ref_log_prob, response_mask).sum(dim=-1) * beta
    return ratio[0::2], ratio[1::2]


def smoothed_pair_loss(margin: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """Each pair's loss from its implicit-reward margin ``z``:
    ``−(1−ε)·log σ(z) − ε·log σ(−z)`` (ε = ``label_smoothing``; 0: DPO's sigmoid loss)."""
    from torch.nn import functional

    eps = label_smoothing
    return -(1.0 - eps) * functional.logsigmoid(margin) - eps * functional.logsigmoid(-margin)


def _live_pairs(advantages: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Which pairs carry weight (both rows have response tokens), after checking the labels.

    A pair whose two rows are fully masked is dispatch padding (``without_padding_weight``
    zeroes the mask of the rows a rank holds only to match the others' count): it has no
    label to check and no weight. A pair with one row masked and not the other is refused.
    """
    import torch

    labels = masked_fill_zero(advantages, response_mask).sum(dim=-1).sign()
    rows = labels.shape[0]
    has = (response_mask != 0).any(dim=-1)
    if not rows % 2:
        chosen, rejected = has[0::2], has[1::2]
        live = chosen & rejected
        if bool(torch.equal(chosen, rejected)) and bool(
            torch.all(labels[0::2][live] > 0) and torch.all(labels[1::2][live] < 0)
        ):
            return live
    raise HfsdkError(
        f"the dpo loss got {rows} rows that are not whole (chosen, rejected) pairs in order; "
        "it needs batches from the dpo program (interleaved pairs, labels +1/-1, both rows "
        "of a pair with response tokens) and passes that keep pairs whole: leave "
        "micro_batch_tokens unset"
    )


def dpo_loss(
    *,
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: DPOLossConfig | None = None,
    aggregation: LossAggregation | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """This part's share of the mini-batch's mean DPO loss (module docstring).

    Metrics: ``dpo_accuracy`` (share of pairs with ``z > 0``) and ``dpo_margin``
    (mean ``z``), over this part's pairs, each as a ``(mean, pairs)`` pair: per-pair means,
    which the actor weights by pairs (weighted by tokens they depended on the micro-batches).
    """
    import torch

    config = config or DPOLossConfig()
    check_token_tensors(
        response_mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages
    )
    live = _live_pairs(advantages, response_mask)
    chosen, rejected = pair_rewards(log_prob, old_log_prob.detach(), response_mask, config.beta)
    z = chosen - rejected
    # Padding pairs (no response tokens) add nothing: their z is 0, whose loss is log 2.
    per_pair = smoothed_pair_loss(z, config.label_smoothing) * live
    # The global count only counts rows with response tokens, so live pairs, as here.
    pairs = float(live.sum())
    dp_size = 1
    if aggregation is not None:
        dp_size = aggregation.dp_size
        if aggregation.global_seq_count is not None:
            pairs = float(torch.as_tensor(aggregation.global_seq_count)) / 2.0
    loss = per_pair.sum() * dp_size / max(pairs, 1.0)
    detached = z.detach()[live]
    local_pairs = float(detached.numel())
    if not local_pairs:
        return loss, {"dpo_accuracy": (0.0, 0.0), "dpo_margin": (0.0, 0.0)}
    return loss, {
        "dpo_accuracy": (float((detached > 0).float().mean()), local_pairs),
        "dpo_margin": (float(detached.mean()), local_pairs),
    }
