"""Core attention on ``torch.nn.functional.scaled_dot_product_attention`` (CPU path).

megatron-core's local ``DotProductAttention`` asks for a CUDA memory buffer,
so on CPU the layer spec's ``core_attention`` is swapped for this module; on
GPU the spec keeps megatron-core's own attention (the spec is the switch).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


class SDPACoreAttention(torch.nn.Module):
    """Causal (optionally key-padded) attention with grouped key/value heads repeated.

    Inputs are megatron's ``[s, b, heads, head_dim]`` tensors of this rank's
    heads; the output is ``[s, b, heads · head_dim]``. ``attention_mask`` is
    ``None`` (plain causal) or a boolean ``[b, 1, s, s]`` with ``True`` where a
    query must not see a key (megatron's convention).
    """

    def __init__(self, config: Any, layer_number: int, attn_mask_type: Any, **_: Any) -> None:
        super().__init__()
        self.config = config
        self.softmax_scale = getattr(config, "softmax_scale", None)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attn_mask_type: Any = None,
        attention_bias: Any = None,
        packed_seq_params: Any = None,
    ) -> torch.Tensor:
        """Attention over this rank's heads (see the class docstring for shapes)."""
        s, b, heads, dim = query.shape
        groups = key.shape[2]
        if groups != heads:
            key = key.repeat_interleave(heads // groups, dim=2)
            value = value.repeat_interleave(heads // groups, dim=2)
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, h, s, d]
        if attention_mask is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=~attention_mask, scale=self.softmax_scale
            )
        return out.permute(2, 0, 1, 3).reshape(s, b, heads * dim)
