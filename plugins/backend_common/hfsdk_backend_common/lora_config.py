"""The ``lora`` key of a trained role: low-rank adapters on the policy (``rank: 0`` is off)."""

from __future__ import annotations

from typing import Any

import attrs

from hfsdk import help_field

ALL_LINEAR = "all-linear"
"""peft's ``target_modules`` for every linear layer but the output head, given alone."""

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""Every linear layer of a Llama / Qwen2 / Mistral block."""


def _check_targets(instance: object, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    if not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(
            f"lora.target_modules={list(value)!r} must be a non-empty list of module names "
            f"(e.g. {list(DEFAULT_TARGETS[:2])}) or ['all-linear']"
        )
    if ALL_LINEAR in value and len(value) > 1:
        # peft takes 'all-linear' only as the whole string; in a list it is a module name no
        # model has, and the preflight's "no layer 'all-linear'" would send the user in circles.
        raise ValueError(
            f"lora.target_modules={list(value)!r} lists 'all-linear' beside other entries; "
            "'all-linear' must be the only entry (it already adapts every linear layer of the "
            "language model): give ['all-linear'] alone, or list module names without it"
        )


@attrs.frozen(kw_only=True)
class LoraConfig:
    """LoRA adapters (peft) on the actor: only they (and their optimizer state) are trained.

    ``rank`` 0 (the default) trains the full model. With ``rank > 0`` the base
    weights are frozen, an adapter ``B @ A`` (scaled by ``alpha / rank``) is added
    to every module named in ``target_modules``, and the reference policy is the
    same model with its adapters disabled when it shares the actor's model
    (docs/backends.md, "LoRA").
    """

    rank: int = help_field(
        "LoRA rank r of the adapters; 0: off (the full model trains).",
        default=0,
        validator=attrs.validators.ge(0),
    )
    alpha: float = help_field(
        "LoRA scaling numerator: the adapter output is multiplied by alpha / rank.",
        default=16.0,
        validator=attrs.validators.gt(0),
    )
    dropout: float = help_field(
        "Dropout on the adapter input (0: none; >0 makes training forwards stochastic).",
        default=0.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.lt(1.0)],
    )
    target_modules: tuple[str, ...] = help_field(
        "Names of the language model's linear modules that get adapters (peft's "
        "target_modules; never the vision tower, an embedding or a tied LM head; "
        "['all-linear'] for every linear layer of the language model but the LM head).",
        default=DEFAULT_TARGETS,
        converter=tuple,
        validator=_check_targets,
    )
    export_merged: bool = help_field(
        "HF export also writes the merged model (base + adapters) to <export>/merged.",
        default=False,
    )
    """The export always writes the adapter (peft's files, loadable onto the base model); with
    this the merged full model is written beside it, loadable without peft."""

    @property
    def enabled(self) -> bool:
        """Whether adapters are used (``rank > 0``)."""
        return self.rank > 0


def unused_lora_settings(config: Any, spec: Any = None, prepared: Any = None) -> str | None:
    """The preflight warning ``unused_lora_settings``: a role's ``lora`` settings changed from
    their defaults beside ``rank: 0``, which builds no adapters and so reads none of them.

    A warning, not a refusal (as :func:`hfsdk_backend_common.objectives.unused_kl_loss`): a
    run saved with such a config must still export, replay and resume. ``None`` when no
    role sets one."""
    lines = []
    for name, lora in _lora_sections(config):
        if lora.enabled:
            continue
        unused = [
            f"{name}.lora.{field.name}={_shown(getattr(lora, field.name))}"
            for field in attrs.fields(LoraConfig)
            if field.name != "rank" and getattr(lora, field.name) != field.default
        ]
        if unused:
            lines.append(
                f"{name}.lora.rank is 0: LoRA is off (the full model trains), so "
                f"{', '.join(unused)} would be ignored; set rank > 0 to train adapters (fsdp "
                f"backend), or drop {'that setting' if len(unused) == 1 else 'those settings'}"
            )
    return "; ".join(lines) or None


def _lora_sections(config: Any) -> list[tuple[str, LoraConfig]]:
    """``(dotted role name, lora)`` of every section with a ``lora`` key, a signal's scoring
    model (``reward.model``) included."""
    found = []
    for name, section in config.sections.items():
        for path, owner in ((name, section), (f"{name}.model", getattr(section, "model", None))):
            lora = getattr(owner, "lora", None)
            if isinstance(lora, LoraConfig):
                found.append((path, lora))
    return found


def _shown(value: object) -> object:
    """A setting as the user wrote it: a list for ``target_modules`` (held as a tuple)."""
    return list(value) if isinstance(value, tuple) else value
