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
group), pass them to every :func:`aggregate_loss` call, and the losses of all
ranks and micro-batches **sum** to the full-batch loss; so do their gradients.
Data-parallel wrappers (DDP, FSDP) *average* gradients over ranks; pass
``dp_size`` (the data-parallel world size) to scale each rank's share so the
average equals the full-batch gradient. For ``seq-mean-token-sum-norm`` pass
the same ``norm_length`` everywhere (e.g. the configured maximum response
length): the default, the padded width of the local tensor, can differ per rank.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from hfsdk.core.algorithm import LOSS_AGG_MODES
from hfsdk.core.errors import HfsdkError
from hfsdk.core.maths.masked import as_bool_mask, check_token_tensors, masked_fill_zero

Count = int | float | torch.Tensor


@attrs.frozen(kw_only=True)
class LossCounts:
    """Valid-token and valid-sequence counts of a (mini-)batch, usually global over ranks."""

    tokens: float
    sequences: float

    def as_kwargs(self) -> dict[str, float]:
        """Keyword arguments for :func:`aggregate_loss` and the registered losses."""
        return {"global_token_count": self.tokens, "global_seq_count": self.sequences}


def local_counts(response_mask: torch.Tensor) -> LossCounts:
    """Counts of this process's part of the batch only."""
    mask = as_bool_mask(response_mask)
    return LossCounts(
        tokens=float(mask.sum().item()), sequences=float(mask.any(dim=-1).sum().item())
    )


def global_counts(response_mask: torch.Tensor, group: Any = None) -> LossCounts:
    """Counts summed over the data-parallel process ``group`` (local without torch.distributed).

    Call it once per mini-batch on every rank with the rank's whole mini-batch
    mask (all its micro-batches concatenated), before the micro-batch loop.
    """
    counts = local_counts(response_mask)
    import torch.distributed as dist

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


def check_loss_agg_mode(mode: str) -> None:
    """Raise :class:`HfsdkError` unless ``mode`` is one of the four aggregation modes."""
    if mode not in LOSS_AGG_MODES:
        raise HfsdkError(
            f"loss_agg_mode={mode!r} is not a loss aggregation mode; expected one of "
            f"{', '.join(LOSS_AGG_MODES)}"
        )


def aggregate_loss(
    loss_mat: torch.Tensor,
    response_mask: torch.Tensor,
    mode: str = "token-mean",
    *,
    global_token_count: Count | None = None,
    global_seq_count: Count | None = None,
    norm_length: float | None = None,
    dp_size: int = 1,
) -> torch.Tensor:
    """Aggregate a per-token loss matrix into a scalar (see the module docstring).

    Without global counts the local ones are used, i.e. the result is the loss
    of this batch alone. With them, the result is this part's share of the
    global loss, multiplied by ``dp_size``. Entries at masked positions are
    ignored, even NaN ones.
    """
    check_loss_agg_mode(mode)
    check_token_tensors(response_mask, loss_mat=loss_mat)
    if dp_size < 1:
        raise HfsdkError(f"dp_size={dp_size}; expected the data-parallel world size, 1 or more")
    mask = as_bool_mask(response_mask)
    masked = masked_fill_zero(loss_mat, mask)
    tokens_per_seq = mask.sum(dim=-1)

    if mode == "token-mean":
        denominator = _count("global_token_count", global_token_count, tokens_per_seq.sum())
        total = masked.sum()
    else:
        denominator = _count("global_seq_count", global_seq_count, (tokens_per_seq > 0).sum())
        seq_sums = masked.sum(dim=-1)
        if mode == "seq-mean-token-mean":
            seq_sums = seq_sums / tokens_per_seq.clamp(min=1).to(seq_sums.dtype)
        elif mode == "seq-mean-token-sum-norm":
            length = float(loss_mat.shape[-1]) if norm_length is None else float(norm_length)
            if not length > 0:
                raise HfsdkError(
                    f"norm_length={norm_length!r}; expected a positive constant length (e.g. the "
                    "maximum response length), the same on every rank"
                )
            seq_sums = seq_sums / length
        total = seq_sums.sum()
    return total * dp_size / denominator.to(total.dtype)
