"""Masked reductions and shape checks for (batch, response_length) tensors.

Every function here reads only the positions where the mask is set: values at
masked positions (padding, prompt tokens, even NaN or inf) never change a
result. That is done with ``torch.where`` rather than multiplying by the mask,
because ``nan * 0`` is still ``nan``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hfsdk.core.errors import HfsdkError


def check_token_tensors(response_mask: torch.Tensor, **tensors: torch.Tensor | None) -> None:
    """Raise :class:`HfsdkError` unless every tensor has the 2-D shape of ``response_mask``.

    ``None`` values are skipped so optional inputs can be passed straight through.
    """
    if not isinstance(response_mask, torch.Tensor) or response_mask.dim() != 2:
        shape = tuple(response_mask.shape) if isinstance(response_mask, torch.Tensor) else None
        raise HfsdkError(
            f"response_mask has shape {shape}; expected a 2-D (batch, response_length) tensor "
            "with 1 on response tokens and 0 on padding"
        )
    for name, tensor in tensors.items():
        if tensor is None:
            continue
        if not isinstance(tensor, torch.Tensor):
            raise HfsdkError(
                f"{name} is a {type(tensor).__name__}; expected a torch.Tensor of shape "
                f"{tuple(response_mask.shape)} like response_mask"
            )
        if tensor.shape != response_mask.shape:
            raise HfsdkError(
                f"{name} has shape {tuple(tensor.shape)} but response_mask has shape "
                f"{tuple(response_mask.shape)}; every per-token tensor must be "
                "(batch, response_length) and aligned with response_mask"
            )


def check_per_sample(name: str, value: Sequence[object] | torch.Tensor, batch_size: int) -> None:
    """Raise :class:`HfsdkError` unless ``value`` holds exactly one entry per sample."""
    if isinstance(value, torch.Tensor):
        if value.shape != (batch_size,):
            raise HfsdkError(
                f"{name} has shape {tuple(value.shape)}; expected ({batch_size},), one value per "
                "sample of the batch"
            )
        return
    if len(value) != batch_size:
        raise HfsdkError(
            f"{name} has {len(value)} entries; expected {batch_size}, one per sample of the batch"
        )


def as_bool_mask(response_mask: torch.Tensor) -> torch.Tensor:
    """The mask as a bool tensor (accepts bool, int or float 0/1 masks)."""
    return response_mask if response_mask.dtype == torch.bool else response_mask != 0


def masked_fill_zero(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``values`` where the mask is set, exactly 0 elsewhere (NaN/inf at masked spots too)."""
    return torch.where(as_bool_mask(response_mask), values, torch.zeros_like(values))


def masked_sum(
    values: torch.Tensor, response_mask: torch.Tensor, dim: int | None = None
) -> torch.Tensor:
    """Sum of ``values`` over masked-in positions (over ``dim``, or everything)."""
    filled = masked_fill_zero(values, response_mask)
    return filled.sum() if dim is None else filled.sum(dim=dim)


def masked_mean(
    values: torch.Tensor, response_mask: torch.Tensor, dim: int | None = None
) -> torch.Tensor:
    """Mean over masked-in positions; 0 where there are none (instead of NaN)."""
    mask = as_bool_mask(response_mask)
    count = mask.sum() if dim is None else mask.sum(dim=dim)
    total = masked_sum(values, mask, dim)
    return total / count.clamp(min=1).to(total.dtype)


def masked_var(
    values: torch.Tensor, response_mask: torch.Tensor, unbiased: bool = True
) -> torch.Tensor:
    """Variance over all masked-in positions (Bessel-corrected by default).

    With fewer than two valid positions the unbiased variance is undefined; 0 is
    returned so callers never see NaN.
    """
    mask = as_bool_mask(response_mask)
    count = mask.sum()
    mean = masked_mean(values, mask)
    squared = masked_sum((values - mean) ** 2, mask)
    denominator = count - 1 if unbiased else count
    if denominator <= 0:
        return torch.zeros((), dtype=values.dtype, device=values.device)
    return squared / denominator


def masked_whiten(
    values: torch.Tensor, response_mask: torch.Tensor, *, shift_mean: bool = True, eps: float = 1e-8
) -> torch.Tensor:
    """Normalise to zero mean and unit variance over masked-in positions; 0 where masked.

    ``(x - mean) / sqrt(var + eps)`` with the unbiased variance of the valid
    positions; ``shift_mean=False`` keeps the mean (only rescales).
    """
    mask = as_bool_mask(response_mask)
    mean = masked_mean(values, mask)
    var = masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean
    return masked_fill_zero(whitened, mask)
