"""Loss aggregation: turning a (batch, tokens) loss matrix into one scalar.

Four modes (``loss_agg_mode`` in algorithm configs), with ``m`` the response
mask, ``N_tok`` the number of valid tokens and ``N_seq`` the number of
sequences with at least one valid token:

- ``token-mean``:              Σ_i Σ_t m·ℓ / N_tok
- ``seq-mean-token-sum``:      Σ_i (Σ_t m·ℓ) / N_seq
- ``seq-mean-token-mean``:     Σ_i (Σ_t m·ℓ / Σ_t m) / N_seq
- ``seq-mean-token-sum-norm``: Σ_i (Σ_t m·ℓ) / (N_seq · L), L a constant length (Dr.GRPO)

Data parallelism. Each term of the outer sums belongs to one sequence, so a
batch split over ranks (and over micro-batches) only needs the *global*
``N_tok`` / ``N_seq`` of the whole mini-batch: compute them once per
mini-batch (:func:`global_counts` all-reduces them over the data-parallel
group), put them in the :class:`LossAggregation` every loss receives, and the losses of all
ranks and micro-batches **sum** to the full-batch loss; so do their gradients.
Data-parallel wrappers (DDP, FSDP) *average* gradients over ranks; pass
``dp_size`` (the data-parallel world size) to scale each rank's share so the
average equals the full-batch gradient. For ``seq-mean-token-sum-norm`` pass
the same ``norm_length`` everywhere (e.g. the configured maximum response
length): the default, the padded width of the local tensor, can differ per rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import attrs

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    import torch

    Count = int | float | torch.Tensor
else:
    Count = Any

LOSS_AGG_MODES: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)
"""The four aggregation modes (``loss_agg_mode`` in algorithm configs)."""

LossAggMode = Literal[
    "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"
]


@attrs.frozen(kw_only=True)
class LossCounts:
    """Valid-token and valid-sequence counts of a (mini-)batch, usually global over ranks."""

    tokens: float
    sequences: float


def check_loss_agg_mode(mode: str) -> None:
    """Raise :class:`HfsdkError` unless ``mode`` is one of the four aggregation modes."""
    if mode not in LOSS_AGG_MODES:
        raise HfsdkError(
            f"loss_agg_mode={mode!r} is not a loss aggregation mode; expected one of "
            f"{', '.join(LOSS_AGG_MODES)}"
        )


def _check_mode(_inst: object, _attr: attrs.Attribute, value: str) -> None:
    check_loss_agg_mode(value)


def _check_dp_size(_inst: object, _attr: attrs.Attribute, value: int) -> None:
    if value < 1:
        raise HfsdkError(f"dp_size={value}; expected the data-parallel world size, 1 or more")


@attrs.frozen(kw_only=True)
class LossAggregation:
    """How every loss of one mini-batch turns its (B, T) loss matrix into a scalar.

    ``mode`` is one of :data:`LOSS_AGG_MODES`; ``global_token_count`` and
    ``global_seq_count`` are the mini-batch's counts over every rank and
    micro-batch (``None``: this tensor's own, i.e. a local loss);
    ``norm_length`` is the constant length of ``seq-mean-token-sum-norm``
    (``None``: the tensor's width); ``dp_size`` scales each rank's share so
    the data-parallel gradient average equals the full-batch gradient.

    ``token_weights`` (B, T), when given, multiplies each token's loss before
    aggregation (the rollout corrections' importance weights: a loss weight, so
    no policy loss has to know about it). ``seq_token_counts`` (B,), when given,
    is each sequence's token count for ``seq-mean-token-mean`` in place of the
    mask's: tokens a correction dropped from the mask still count, so the loss
    scale does not grow as more are dropped.
    """

    mode: str = attrs.field(default="token-mean", validator=_check_mode)
    global_token_count: Count | None = None
    global_seq_count: Count | None = None
    norm_length: float | None = None
    dp_size: int = attrs.field(default=1, validator=_check_dp_size)
    token_weights: Any = attrs.field(default=None, eq=False, repr=False)
    seq_token_counts: Any = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def from_counts(
        cls, mode: str, counts: LossCounts, *, norm_length: float | None = None, dp_size: int = 1
    ) -> LossAggregation:
        """The aggregation of a mini-batch whose global counts are ``counts``."""
        return cls(
            mode=mode,
            global_token_count=counts.tokens,
            global_seq_count=counts.sequences,
            norm_length=norm_length,
            dp_size=dp_size,
        )

    def __call__(self, loss_mat: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
        """Aggregate ``loss_mat`` (see :func:`aggregate_loss`)."""
        return aggregate_loss(loss_mat, response_mask, self)


LOCAL_TOKEN_MEAN = LossAggregation()
"""``token-mean`` over the given tensor alone (the default of every loss)."""


def local_counts(response_mask: torch.Tensor) -> LossCounts:
    """Counts of this process's part of the batch only."""
    from hfsdk.core.maths.masked import as_bool_mask

    mask = as_bool_mask(response_mask)
    return LossCounts(
        tokens=float(mask.sum().item()), sequences=float(mask.any(dim=-1).sum().item())
    )


def global_counts(response_mask: torch.Tensor, group: Any = None) -> LossCounts:
    """Counts summed over the data-parallel process ``group`` (local without torch.distributed).

    Call it once per mini-batch on every rank with the rank's whole mini-batch
    mask (all its micro-batches concatenated), before the micro-batch loop.
    """
    import torch
    import torch.distributed as dist

    counts = local_counts(response_mask)
    if not (dist.is_available() and dist.is_initialized()):
        return counts
    # On the mask's device: NCCL cannot all-reduce CPU tensors.
    buffer = torch.tensor(
        [counts.tokens, counts.sequences], dtype=torch.float64, device=response_mask.device
    )
    dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=group)
    return LossCounts(tokens=float(buffer[0]), sequences=float(buffer[1]))


def _count(name: str, value: Count | None, local: torch.Tensor) -> torch.Tensor:
    """The global count as a tensor (the local one when not given), at least 1."""
    import torch

    if value is None:
        return local.to(torch.float64).clamp(min=1)
    tensor = torch.as_tensor(value, dtype=torch.float64)
    if tensor.dim() != 0 or not bool(torch.isfinite(tensor)) or float(tensor) < 0:
        raise HfsdkError(
            f"{name}={value!r}; expected a finite, non-negative number (the count over all "
            "data-parallel ranks and micro-batches of the mini-batch)"
        )
    # Fewer valid entries globally than locally means the caller passed the wrong count.
    if float(tensor) < float(local):
        raise HfsdkError(
            f"{name}={float(tensor):g} is smaller than this rank's own count {float(local):g}; "
            "pass the count summed over every rank and micro-batch (see global_counts())"
        )
    return tensor.clamp(min=1)


def as_aggregation(aggregation: LossAggregation | str | None) -> LossAggregation:
    """A :class:`LossAggregation` from one, from a bare mode name, or the local token mean."""
    if aggregation is None:
        return LOCAL_TOKEN_MEAN
    if isinstance(aggregation, str):
        return LossAggregation(mode=aggregation)
    if not isinstance(aggregation, LossAggregation):
        raise HfsdkError(
            f"aggregation={aggregation!r}; expected a LossAggregation or a mode name "
            f"({', '.join(LOSS_AGG_MODES)})"
        )
    return aggregation


def aggregate_loss(
    loss_mat: torch.Tensor,
    response_mask: torch.Tensor,
    aggregation: LossAggregation | str | None = None,
) -> torch.Tensor:
    """Aggregate a per-token loss matrix into a scalar (see the module docstring).

    Without global counts the local ones are used, i.e. the result is the loss
    of this batch alone. With them, the result is this part's share of the
    global loss, multiplied by ``dp_size``. Entries at masked positions are
    ignored, even NaN ones.
    """
    from hfsdk.core.maths.masked import as_bool_mask, check_token_tensors, masked_fill_zero

    agg = as_aggregation(aggregation)
    mode = agg.mode
    check_token_tensors(response_mask, loss_mat=loss_mat)
    mask = as_bool_mask(response_mask)
    masked = masked_fill_zero(loss_mat, mask)
    if agg.token_weights is not None:
        check_token_tensors(response_mask, token_weights=agg.token_weights)
        masked = masked * masked_fill_zero(agg.token_weights, mask).to(masked.dtype)
    tokens_per_seq = mask.sum(dim=-1)

    if mode == "token-mean":
        denominator = _count("global_token_count", agg.global_token_count, tokens_per_seq.sum())
        total = masked.sum()
    else:
        local_seqs = (tokens_per_seq > 0).sum()
        denominator = _count("global_seq_count", agg.global_seq_count, local_seqs)
        seq_sums = masked.sum(dim=-1)
        if mode == "seq-mean-token-mean":
            lengths = tokens_per_seq if agg.seq_token_counts is None else agg.seq_token_counts
            seq_sums = seq_sums / lengths.clamp(min=1).to(seq_sums.dtype)
        elif mode == "seq-mean-token-sum-norm":
            norm_length = agg.norm_length
            length = float(loss_mat.shape[-1]) if norm_length is None else float(norm_length)
            if not length > 0:
                raise HfsdkError(
                    f"norm_length={norm_length!r}; expected a positive constant length (e.g. the "
                    "maximum response length), the same on every rank"
                )
            seq_sums = seq_sums / length
        total = seq_sums.sum()
    return total * agg.dp_size / denominator.to(total.dtype)
