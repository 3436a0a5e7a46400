"""Log-probabilities and entropy on vocab-parallel logits, without gathering the vocabulary.

Each tensor-parallel rank holds the logits of its vocabulary slice. The
softmax statistics are combined across the tensor-parallel group: the
maximum (all-reduce MAX, no gradient), the sum of exponentials and the
exp-weighted logit sum (all-reduce SUM, gradient passed through unchanged,
megatron-core's ``reduce_from_tensor_model_parallel_region``). Only
``(B, R)`` tensors cross ranks, never ``(B, R, V)``.
"""

from __future__ import annotations

import torch


def _reduce_sum(tensor: torch.Tensor, tp: int) -> torch.Tensor:
    if tp == 1:
        return tensor
    from megatron.core.tensor_parallel.mappings import reduce_from_tensor_model_parallel_region

    return reduce_from_tensor_model_parallel_region(tensor)


def _reduce_max(tensor: torch.Tensor, tp: int) -> torch.Tensor:
    if tp == 1:
        return tensor
    import torch.distributed as dist
    from megatron.core import parallel_state as mpu

    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=mpu.get_tensor_model_parallel_group())
    return tensor


def vocab_parallel_log_probs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    vocab_start: int,
    vocab_size: int,
    tp: int,
    with_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``log p(target)`` and the entropy at every position, from this rank's vocab slice.

    ``logits``: ``(..., V_local)`` (already divided by the temperature),
    columns ``[vocab_start, vocab_start + V_local)`` of the padded vocabulary;
    columns at or beyond ``vocab_size`` are padding and get no probability.
    ``targets``: ``(...)`` token ids in the full vocabulary. Differentiable.
    """
    logits = logits.float()
    width = logits.shape[-1]
    columns = torch.arange(vocab_start, vocab_start + width, device=logits.device)
    valid = columns < vocab_size
    if not bool(valid.all()):
        logits = logits.masked_fill(~valid, float("-inf"))
    peak = _reduce_max(logits.detach().amax(dim=-1), tp)
    shifted = logits - peak.unsqueeze(-1)
    exp = shifted.exp()
    sum_exp = _reduce_sum(exp.sum(dim=-1), tp)
    log_z = sum_exp.log()
    local = targets.long() - vocab_start
    owned = (local >= 0) & (local < width)
    picked = shifted.gather(-1, local.clamp(0, width - 1).unsqueeze(-1)).squeeze(-1)
    chosen = _reduce_sum(torch.where(owned, picked, torch.zeros_like(picked)), tp)
    log_probs = chosen - log_z
    entropy = None
    if with_entropy:
        weighted = torch.where(valid, exp * shifted, torch.zeros_like(shifted)).sum(dim=-1)
        entropy = log_z - _reduce_sum(weighted, tp) / sum_exp
    return log_probs, entropy
