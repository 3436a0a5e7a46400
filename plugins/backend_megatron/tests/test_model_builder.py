"""The layer spec's core attention follows the device: megatron-core's own on CUDA."""

from __future__ import annotations

import torch

from hfsdk_backend_megatron.model_builder import layer_spec
from hfsdk_backend_megatron.sdpa_attention import SDPACoreAttention


def _core_attention(device: str) -> type:
    return layer_spec(torch.device(device)).submodules.self_attention.submodules.core_attention


def test_cuda_keeps_megatron_dot_product_attention_and_cpu_gets_sdpa() -> None:
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    # Building the spec allocates nothing, so the CUDA choice is checked without a GPU.
    assert _core_attention("cuda") is DotProductAttention
    assert _core_attention("cuda:0") is DotProductAttention
    assert _core_attention("cpu") is SDPACoreAttention
    # Each call builds a fresh spec: the CPU swap does not leak into a later CUDA spec.
    assert _core_attention("cuda") is DotProductAttention
