"""A generation module with no weights between calls: built once, filled per call, freed after.

The module is the actor's architecture (from its transformers config) with
its parameters on the meta device and its buffers (rotary frequencies) real,
so filling it needs only the parameters. Parameters are materialised and
freed by identity: a parameter shared by two modules (tied input and output
embeddings) stays one tensor, so it is filled once, from the one name the
actor's weights carry for it. (``Module.to_empty`` would give each of the
two its own storage and leave the output layer uninitialised.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


@contextlib.contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Every parameter registered inside is moved to the meta device; buffers stay real."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            module._parameters[name] = nn.Parameter(
                param.detach().to("meta"), requires_grad=param.requires_grad
            )

    nn.Module.register_parameter = on_meta  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]


def image_text_only(config: Any) -> bool:
    """Whether transformers maps ``config`` to an image-text-to-text model but no causal LM
    (Qwen2-VL): such a model generates text but loads with ``AutoModelForImageTextToText``."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    kind = config.model_type
    return (
        kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and kind in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    )


def build_on_meta(hf_config: Any, device: torch.device) -> nn.Module:
    """The text generator of ``hf_config`` (its causal LM, or its image-text-to-text model) in
    eval mode: parameters on meta, buffers on ``device``."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    auto = AutoModelForImageTextToText if image_text_only(hf_config) else AutoModelForCausalLM
    with _parameters_on_meta(), torch.device(device):
        module = auto.from_config(hf_config)
    return module.eval()


def _swap_parameters(module: nn.Module, make: Any) -> None:
    """Replace every parameter by ``make(param)``, one new tensor per distinct parameter."""
    replaced: dict[int, nn.Parameter] = {}
    for sub in module.modules():
        for name, param in list(sub._parameters.items()):
            if param is None:
                continue
            if id(param) not in replaced:
                replaced[id(param)] = nn.Parameter(make(param), requires_grad=False)
            sub._parameters[name] = replaced[id(param)]


def materialize(module: nn.Module, device: torch.device, dtype: torch.dtype) -> None:
    """Give every parameter uninitialised storage on ``device`` in ``dtype`` (ties kept)."""
    _swap_parameters(module, lambda p: torch.empty(p.shape, device=device, dtype=dtype))


def release(module: nn.Module) -> None:
    """Move every parameter back to the meta device (frees the weights; ties kept)."""
    _swap_parameters(module, lambda p: torch.empty(p.shape, device="meta", dtype=p.dtype))


def parameter_bytes(module: nn.Module) -> int:
    """Bytes of the module's distinct parameters."""
    return sum(p.numel() * p.element_size() for p in module.parameters())
