"""LoRA on the actor with peft: attaching adapters, merged HF weights, adapter export.

The actor's module becomes a ``peft.PeftModel`` whose base weights are frozen.
Everything that leaves the engine speaks plain HF names: :func:`merged_weights`
turns the peft module's parameter stream into the merged model's
``(name, W + (alpha / r) · B @ A)`` pairs, so a rollout never sees a peft name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from hfsdk_backend_common.lora_config import LoraConfig

if TYPE_CHECKING:
    from torch import nn

PEFT_PREFIX = "base_model.model."
"""What peft puts in front of every name of the wrapped model."""
ADAPTER = "default"
"""The one adapter the actor trains."""
MERGED_DIR = "merged"
"""Where :func:`export_adapter`'s caller writes the merged model, inside the export directory."""


def attach_adapters(model: nn.Module, config: LoraConfig, *, seed: int) -> nn.Module:
    """``model`` wrapped in a peft LoRA model: base weights frozen, adapters trainable.

    Adapters are initialised from ``seed`` (the same on every rank); ``B`` starts
    at zero, so the wrapped model computes exactly what ``model`` did. They go on
    the language model only: a vision tower is excluded (see :func:`_vision_exclusion`).
    """
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    from hfsdk import seeded_rng

    targets: Any = list(config.target_modules)
    if targets == ["all-linear"]:
        targets = "all-linear"
    else:
        _check_targets(model, targets)
    peft_config = PeftLoraConfig(
        r=config.rank,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=targets,
        exclude_modules=_vision_exclusion(model),
        bias="none",
        task_type="CAUSAL_LM",
    )
    with seeded_rng(seed):
        return get_peft_model(model, peft_config)


def _vision_exclusion(model: nn.Module) -> str | None:
    """peft's ``exclude_modules`` (a full-match pattern) for everything inside ``model``'s
    vision tower; ``None`` for a text-only model (peft warns about an exclusion that excludes
    nothing). ``all-linear`` and a name like ``proj`` would otherwise adapt the image encoder
    too, against ``freeze_vision`` and the docs' "LoRA on the language model"."""
    import re

    from hfsdk_backend_common.vision_tower import vision_tower_modules

    towers = vision_tower_modules(model)
    if not towers:
        return None
    return "|".join(rf"{re.escape(tower)}(\..*)?" for tower in towers)


ADAPTABLE_KINDS = "Linear (or GPT-2's Conv1D)"
"""What the merge into the rollout's weights handles, in the words of the errors."""


def _adaptable(module: nn.Module) -> bool:
    """Whether :func:`merged_weights` merges an adapter on ``module``: a linear layer (peft
    also adapts embeddings and convolutions, whose factors it stores differently)."""
    from transformers.pytorch_utils import Conv1D  # GPT-2's projections

    return isinstance(module, (torch.nn.Linear, Conv1D))


def _matches(name: str, target: str) -> bool:
    """peft's rule for a listed target: the module's whole name or its trailing dotted parts."""
    return name == target or name.endswith("." + target)


def _tied_output(model: nn.Module) -> nn.Module | None:
    """The LM head when it shares its weight with the input embeddings, else ``None``."""
    output = getattr(model, "get_output_embeddings", lambda: None)()
    embeddings = getattr(model, "get_input_embeddings", lambda: None)()
    if output is None or embeddings is None:
        return None
    return output if output.weight is embeddings.weight else None


def _check_targets(model: nn.Module, targets: list[str]) -> None:
    """Every target must name a layer of ``model``'s language model that LoRA adapts here:
    peft ignores a name that matches nothing while another matches (and fails obscurely
    when none does), and adapters on other layers break the merged weights a rollout gets."""
    from hfsdk import HfsdkError
    from hfsdk_backend_common.vision_tower import in_vision_tower

    modules = [(n, m) for n, m in model.named_modules() if n]
    tied = _tied_output(model)
    layers = sorted(
        {
            n.rsplit(".", 1)[-1]
            for n, m in modules
            if _adaptable(m) and m is not tied and not in_vision_tower(n)
        }
    )
    key = "actor.lora.target_modules"
    unknown = [t for t in targets if not any(_matches(n, t) for n, _ in modules)]
    if unknown:
        raise HfsdkError(
            f"{key} names {unknown}, which this model has no layer of; "
            f"its layers LoRA can adapt are {layers} (or give ['all-linear'])"
        )
    for target in targets:
        matched = [(n, m) for n, m in modules if _matches(n, target) and not in_vision_tower(n)]
        if not matched:
            raise HfsdkError(
                f"{key} names {target!r}, which only the vision tower has; LoRA adapts the "
                f"language model only; name its layers instead: {layers} (or give ['all-linear'])"
            )
        for name, module in matched:
            if module is tied:
                raise HfsdkError(
                    f"{key} names {target!r}, the LM head {name!r}, which shares its weight "
                    "with the input embeddings (tie_word_embeddings), so it cannot take an "
                    "adapter of its own; drop it (['all-linear'] leaves the LM head out)"
                )
            if not _adaptable(module):
                raise HfsdkError(
                    f"{key} names {target!r}, which matches {name!r} "
                    f"({type(module).__name__}); only {ADAPTABLE_KINDS} layers take adapters, "
                    f"whose merge into the rollout's weights is supported; drop it or name "
                    f"one of {layers}"
                )


def check_lora_targets(config: Any, spec: Any, prepared: Any) -> None:
    """The preflight check ``lora_targets``: :func:`_check_targets` on the actor's model
    (an image-text model too) built on the meta device (no weights read), before any
    worker starts."""
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
    from hfsdk_backend_fsdp.models import build_model_on_meta

    actor = config.sections.get("actor")
    if not isinstance(actor, FSDPRoleConfig) or not actor.lora.rank:
        return
    targets = list(actor.lora.target_modules)
    path = actor.model_path or prepared.assets.model_path
    if targets == ["all-linear"] or not path:
        return
    try:
        model = build_model_on_meta(path, "causal_lm", torch.float32)
    except (OSError, ValueError):  # no model transformers builds: the worker reports it
        return
    _check_targets(model, targets)


def base_model(module: nn.Module) -> nn.Module:
    """The HF model inside a peft wrapper (``module`` itself when it is not one)."""
    getter = getattr(type(module), "get_base_model", None)
    return module.get_base_model() if getter is not None else module


def is_lora(module: nn.Module) -> bool:
    """Whether ``module`` carries peft adapters."""
    from peft import PeftModel

    return isinstance(module, PeftModel)


@contextlib.contextmanager
def adapters_disabled(module: nn.Module) -> Iterator[None]:
    """Forwards inside compute the base model alone (the reference policy)."""
    with module.disable_adapter():
        yield


def scaling(module: nn.Module) -> float:
    """The adapter's ``alpha / r`` (peft's ``scaling``)."""
    config = module.peft_config[ADAPTER]
    return float(config.lora_alpha) / float(config.r)


def hf_name(name: str) -> str:
    """The plain HF name of a peft parameter: no ``base_model.model.``, no ``.base_layer``."""
    if name.startswith(PEFT_PREFIX):
        name = name[len(PEFT_PREFIX) :]
    return name.replace(".base_layer.", ".")


def fan_in_fan_out_modules(module: nn.Module) -> frozenset[str]:
    """Names (as the module names its parameters) of the LoRA layers whose base weight is
    stored ``(in, out)`` (peft's ``fan_in_fan_out``: GPT-2-style ``Conv1D``)."""
    from peft.tuners.lora import LoraLayer

    return frozenset(
        name
        for name, layer in module.named_modules()
        if isinstance(layer, LoraLayer) and layer.fan_in_fan_out
    )


def merged_weights(
    stream: Iterable[tuple[str, torch.Tensor]],
    scale: float,
    fan_in_fan_out: Collection[str] = (),
    *,
    probes: dict[str, Any] | None = None,
    sent_dtype: torch.dtype | None = None,
    lose_first_update: bool = False,
) -> Iterator[tuple[str, torch.Tensor]]:
    """HF-named merged weights from a peft module's ``(name, full tensor)`` stream.

    A module's base weight and its ``lora_A`` / ``lora_B`` arrive together (one
    FSDP unit holds them), so at most one module's tensors wait here. Merged
    weights are new tensors; the others are passed through. ``B @ A`` is
    ``(out, in)``; the modules named in ``fan_in_fan_out``
    (:func:`fan_in_fan_out_modules`) store their weight transposed, so their delta is too.

    ``probes``: filled with each merged weight's :func:`~hfsdk_backend_common.low_rank_probe`
    (from the factors, before the weight is yielded), which a receiver checks what it holds against;
    ``sent_dtype``: the dtype the weights leave in (its rounding is tolerated).
    ``lose_first_update`` (fault injection, ``lora_merge_bad``): the first merged module
    is yielded as its base weight alone, as a merge that skipped a module would; its probe
    is still the true merge's.
    """
    from hfsdk_backend_common import low_rank_probe

    pending: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in stream:
        for part in ("base_layer.weight", f"lora_A.{ADAPTER}.weight", f"lora_B.{ADAPTER}.weight"):
            if name.endswith("." + part):
                owner = name[: -len(part) - 1]
                parts = pending.setdefault(owner, {})
                parts[part.split(".")[0]] = tensor
                if len(parts) == 3:
                    del pending[owner]
                    base, a, b = parts["base_layer"], parts["lora_A"], parts["lora_B"]
                    merged_name = hf_name(owner) + ".weight"
                    transposed = owner in fan_in_fan_out
                    if probes is not None:
                        coarser = max(
                            (base.dtype, sent_dtype or base.dtype),
                            key=lambda d: torch.finfo(d).eps,
                        )
                        probes[merged_name] = low_rank_probe(
                            base, a, b, scale, transposed=transposed, dtype=coarser
                        )
                    if lose_first_update:
                        lose_first_update = False
                        yield merged_name, base
                        break
                    delta = (b.float() @ a.float()) * scale
                    if transposed:
                        delta = delta.T
                    yield merged_name, (base.float() + delta).to(base.dtype)
                break
        else:
            yield hf_name(name), tensor
    if pending:
        raise RuntimeError(f"LoRA modules without all of base, A and B: {sorted(pending)[:3]}")


def adapter_state(module: nn.Module, full_state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The adapter tensors of a full state dict, in peft's saved names."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(module, state_dict=full_state, adapter_name=ADAPTER)


def export_adapter(
    module: nn.Module, full_state: dict[str, torch.Tensor], directory: Path, base_path: str
) -> None:
    """``adapter_config.json`` and ``adapter_model.safetensors``, written by peft itself.

    ``save_pretrained(state_dict=...)`` takes the gathered full state (an FSDP
    module's own parameters are shards) and picks the adapter's tensors; its files
    are moved into ``directory`` atomically.
    """
    import os
    import tempfile

    from hfsdk import atomic_path

    directory.mkdir(parents=True, exist_ok=True)
    module.peft_config[ADAPTER].base_model_name_or_path = base_path
    with tempfile.TemporaryDirectory(dir=directory, prefix=".adapter-") as tmp:
        module.save_pretrained(
            tmp, state_dict=full_state, selected_adapters=[ADAPTER], safe_serialization=True
        )
        for name in ("adapter_model.safetensors", "adapter_config.json"):
            with atomic_path(directory / name) as target:
                os.replace(Path(tmp) / name, target)


def merged_state(module: nn.Module, full_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The merged model's HF state dict from a peft module's full state dict."""
    return dict(merged_weights(full_state.items(), scaling(module), fan_in_fan_out_modules(module)))


def base_state(full_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The frozen base model's HF state dict from a peft module's full state dict: the
    adapter tensors left out, the rest under plain HF names."""
    return {hf_name(name): tensor for name, tensor in full_state.items() if ".lora_" not in name}
