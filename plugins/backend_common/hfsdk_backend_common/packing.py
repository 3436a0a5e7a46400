"""Sequence packing: a micro-batch's rows as one sequence with no padding at all.

A padded micro-batch ``(B, P + R)`` (left-padded prompts, right-padded
responses) becomes one row ``(1, N)`` of its ``N`` attended tokens, row after
row. Positions restart at 0 with every row, and the attention of each token
is limited to earlier tokens of its own row: :meth:`PackedRows.attention_mask`
is that block-diagonal causal mask, passed to the model as a 4D additive mask
(sdpa and eager attention use it as given). transformers can infer the same
mask from packed ``position_ids`` with no mask, but only when no KV cache is
made (``use_cache=False``): without it the rows would attend to each other.

The outputs that matter are those predicting a response token (or, for a
critic, valuing the state before it): :meth:`PackedRows.response_outputs`
says which packed positions they are, and :meth:`PackedRows.scatter` puts
per-response-token values back into the ``(B, R)`` layout of the batch.
"""

from __future__ import annotations

import attrs
import torch


@attrs.frozen(kw_only=True)
class PackedRows:
    """One micro-batch packed: ``input_ids`` / ``position_ids`` ``(1, N)`` and the way back.

    ``rows`` and ``columns`` give each packed token's row and column in the
    padded batch; ``shape`` is the padded ``(B, P + R)``.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    rows: torch.Tensor
    columns: torch.Tensor
    shape: tuple[int, int]
    keep: torch.Tensor
    """Packed positions whose output belongs to a response token (see :func:`pack_rows`)."""
    targets: tuple[torch.Tensor, torch.Tensor]
    """``(row, response index)`` of each kept output."""

    @property
    def tokens(self) -> int:
        """Tokens in the packed sequence."""
        return int(self.input_ids.shape[1])

    def attention_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """The block-diagonal causal mask ``(1, 1, N, N)``: 0 where a token may attend (an
        earlier or the same token of its own row), the dtype's minimum elsewhere."""
        n = self.tokens
        same_row = self.rows[:, None] == self.rows[None, :]
        causal = torch.ones(n, n, dtype=torch.bool, device=self.rows.device).tril()
        allowed = (same_row & causal)[None, None]
        mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
        return mask.masked_fill(~allowed, torch.finfo(dtype).min)

    def response_tokens(self, responses: torch.Tensor) -> torch.Tensor:
        """The response token each kept output predicts, ``(K,)``."""
        rows, index = self.targets
        return responses[rows, index]

    def scatter(self, values: torch.Tensor, width: int) -> torch.Tensor:
        """``(K, ...)`` per-response-token values into ``(B, width, ...)``, 0 elsewhere
        (differentiable)."""
        rows, index = self.targets
        out = values.new_zeros((self.shape[0], width, *values.shape[1:]))
        return out.index_put((rows, index), values)


def pack_rows(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    response_width: int,
) -> PackedRows:
    """Pack the attended tokens of ``(B, P + R)`` rows into one ``(1, N)`` sequence.

    Output ``i`` of a causal model predicts token ``i + 1`` of the same row,
    so response token ``t`` of a row (column ``P + t``) is predicted by the
    packed position of column ``P + t - 1``; those positions (where token
    ``P + t`` is attended) are ``keep``.
    """
    valid = attention_mask.bool()
    rows, columns = valid.nonzero(as_tuple=True)  # row-major: rows in order, columns ascending
    width = attention_mask.shape[1]
    prompt = width - response_width
    # Packed index of every attended (row, column); -1 elsewhere.
    index = torch.full(valid.shape, -1, dtype=torch.long, device=valid.device)
    index[rows, columns] = torch.arange(rows.numel(), device=valid.device)
    target_valid = valid[:, prompt:]
    source = index[:, prompt - 1 : width - 1]
    kept_rows, kept_t = (target_valid & (source >= 0)).nonzero(as_tuple=True)
    return PackedRows(
        input_ids=input_ids[rows, columns][None],
        position_ids=position_ids[rows, columns][None],
        rows=rows,
        columns=columns,
        shape=(int(valid.shape[0]), int(width)),
        keep=source[kept_rows, kept_t],
        targets=(kept_rows, kept_t),
    )
