"""The decoder's matrix products ``x @ W.T``, with CPU weights prepacked for oneDNN.

A decode step multiplies a few rows (one per sequence) by every weight matrix
of the model. On CPU torch's default kernel for that shape reads the weight
in its stored layout at every step; oneDNN's inner product on a weight
reordered once into its blocked layout runs the same products 1.4–2.6× faster
(32 rows, the compute-bound benchmark model's shapes, 2-core AVX-512 machine:
float32 79–120 → 166–210 GFLOP/s, bfloat16 207–278 → 295–417;
``benchmarks/decode_kernels.py``, docs/benchmarks.md). Reordering costs one copy
of each weight, paid once per decoder (one ``generate`` call, or one request
server's life), and holds that copy while the decoder lives.

GPUs, CPU builds without oneDNN, and bfloat16 weights on a CPU without oneDNN's
bfloat16 kernels (AVX2 only: the reorder fails) multiply by the weights as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

_PACKABLE_DTYPES = ("float32", "bfloat16")
# oneDNN picks its blocking for this many rows (every row count stays correct). Reordered
# for 8, 32, 64 or 256 rows, products of 8 and 32 rows ran equally fast; for 1 row,
# 15-40 % slower (2-core AVX-512 machine, float32, the benchmark model's shapes).
_ROWS_HINT = 32


def packing_available(weight: torch.Tensor) -> bool:
    """Whether ``weight`` can be reordered for oneDNN here (CPU, a supported dtype, oneDNN)."""
    import torch

    return (
        weight.device.type == "cpu"
        and str(weight.dtype).removeprefix("torch.") in _PACKABLE_DTYPES
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


class DecodeLinears:
    """``x @ weights[name].T`` for the named 2-D weights, on reordered copies where possible."""

    def __init__(self, weights: Mapping[str, torch.Tensor], names: Iterable[str]) -> None:
        import torch

        self.weights = weights
        self.packed: dict[str, torch.Tensor] = {}
        for name in names:
            weight = weights[name]
            if not packing_available(weight):
                continue
            try:
                self.packed[name] = torch.ops.mkldnn._reorder_linear_weight(
                    weight.detach(), _ROWS_HINT
                )
            except RuntimeError as error:  # a oneDNN build without this path: plain products
                logger.debug("decoder: %s stays unpacked (%s)", name, error)
                self.packed.clear()
                return

    def __call__(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """``x (..., in) @ W.T`` → ``(..., out)``."""
        packed = self.packed.get(name)
        if packed is None or x.dtype != packed.dtype:
            return x @ self.weights[name].T
        import torch

        return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
