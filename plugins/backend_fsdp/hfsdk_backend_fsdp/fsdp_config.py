"""Configuration of the FSDP2 training backend and the HF-generate rollout backend."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from hfsdk import help_field
from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_common.role_fields import TrainedRoleConfig
from hfsdk_backend_common.rollout_config import HFRolloutConfig


@attrs.frozen(kw_only=True)
class FSDPRoleConfig(TrainedRoleConfig):
    """A role (actor, critic, reference, reward, cost) trained or served with FSDP2.

    The model, tokenizer, batch-size, optimizer, dtype and device keys are the
    shared :class:`~hfsdk_backend_common.role_fields.TrainedRoleConfig`'s (see
    there what the batch sizes count); the rest is FSDP's own.
    """

    backend: str = help_field(
        "Training backend of this role (fsdp: FSDP2 over HF transformers models).",
        default="fsdp",
    )
    micro_batch_tokens: int | None = help_field(
        "Token budget of one forward/backward pass on one rank (rows x the width the pass runs "
        "at): rows of similar length share a pass; replaces micro_batch_size and "
        "forward_micro_batch_size; null: fixed row counts.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
        resumable=True,
    )
    """Passes are sized by tokens instead of rows: a pass over rows padded to its
    longest row costs rows x that length (x the batch's full width where the engine
    drops no padding columns: the critic, score models, ``remove_padding: false``), and
    rows are grouped (in training, by length) so the cost stays within the budget; a
    row longer than the budget gets a pass of its own. All data-parallel ranks run the
    same number of passes."""
    gradient_checkpointing: bool = help_field(
        "Recompute activations in backward (less memory, ~30% more compute).",
        default=False,
        resumable=True,
    )
    attn_implementation: Literal["auto", "sdpa", "eager"] = help_field(
        "Attention kernel of the HF model: sdpa, eager, or auto (eager when a trained role "
        "computes in bfloat16 on CPU, else the model's default).",
        default="auto",
        validator=attrs.validators.in_(("auto", "sdpa", "eager")),
    )
    """transformers' ``attn_implementation``. ``auto`` picks ``eager`` for a trained role
    computing in bfloat16 on CPU: there torch's fused attention backward takes about 13x its
    forward (31 ms per layer for 32 x 70 tokens, docs/benchmarks.md) and the plain matrix
    products are faster; everywhere else it keeps the model's default (``sdpa`` where the
    architecture has it)."""
    reshard_after_forward: bool = help_field(
        "FSDP2: free gathered parameters after forward (ZeRO-3) instead of keeping them to "
        "backward (ZeRO-2).",
        default=True,
        resumable=True,
    )
    """FSDP2: free gathered weights after each forward (less memory, one more all-gather)."""
    compile: bool = help_field(
        "torch.compile the model for log-prob, value and training passes (inductor; the "
        "first passes of each shape family compile, about 30 s for a 30M model on CPU).",
        default=False,
    )
    """``torch.compile`` of the model for the log-prob, value and training passes (not
    generation). Measured in docs/benchmarks.md ("torch.compile"): it pays only once its
    compile time is amortised over many steps of the same shapes."""
    remove_padding: bool = help_field(
        "Log-prob and training passes drop the columns that are padding in every row of a "
        "micro-batch.",
        default=True,
        resumable=True,
    )
    """Log-prob and training passes drop the columns that are padding in every row of a
    micro-batch (leading prompt padding, response padding after the longest response)."""
    packing: bool = help_field(
        "Pack each micro-batch's rows into one padding-free sequence (positions restart per "
        "row, attention never crosses rows) for log-prob, value and training passes.",
        default=False,
        resumable=True,
    )
    """Sequence packing (docs/backends.md, "Sequence packing"): no padding token is computed;
    with ``micro_batch_tokens`` a pass's cost is its rows' summed length, not rows x longest."""
    freeze_vision: bool = help_field(
        "Freeze the vision tower of an image-text model (its parameters under visual., "
        "vision_tower. or vision_model.): no gradient, no optimizer state; the language "
        "model trains.",
        default=False,
    )
    lora: LoraConfig = help_field(
        "LoRA adapters on the policy {rank, alpha, dropout, target_modules}; rank 0: off.",
        factory=LoraConfig,
    )
    """peft LoRA on the actor (docs/backends.md, "LoRA"): base weights frozen, only the
    adapters and their optimizer state train and are checkpointed; a reference on the
    actor's model is the actor with its adapters disabled."""
    offload: bool = help_field(
        "FSDP2 CPU offload of parameters, gradients and optimizer state (GPU only; a "
        "no-op on CPU).",
        default=False,
        resumable=True,
    )
    """FSDP2's ``CPUOffloadPolicy``: sharded parameters, gradients and the optimizer step live
    in host memory; each unit is copied to the GPU for its forward/backward. On a CPU-only
    machine everything already is in host memory: the key is accepted and does nothing
    (one info line)."""
    rollout_layout: RolloutLayoutConfig = help_field(
        "The actor's generation layout {tp}: tp > 1 decodes with tensor parallelism over tp "
        "ranks, each fetching only its slice of the FSDP shards (Llama; tp must "
        "divide the ranks, heads and FFN); default tp 1: every rank generates with the full "
        "model (docs/hybrid_engine.md).",
        factory=RolloutLayoutConfig,
    )
    """The actor's generation layout (``hf`` rollout only): ``tp: 1`` streams the full model
    into ``generate`` on every rank; ``tp > 1`` gathers each rank's tensor-parallel slice
    from the FSDP shards and decodes with ``TPDecoder`` (see ``tp_rollout``)."""


def run_config_problems(config: Any) -> list[str]:
    """Cross-section mistakes in a run config with FSDP roles or the ``hf`` rollout."""
    problems = []
    rollout = getattr(config, "rollout", None)
    # Every rollout backend's ``n`` (hf, vllm, hf_vision, a third party's) is ignored by
    # training, whatever the config class: look for the field, not the class.
    samples = getattr(rollout, "n", 1)
    if isinstance(samples, int) and samples != 1:
        problems.append(
            f"rollout.n={samples} is not used by training runs: algorithms sample "
            "algorithm.n_samples_per_prompt responses per prompt; set that instead"
        )
    problems.extend(_mini_batch_problems(config))
    problems.extend(_lora_problems(config))
    problems.extend(_rollout_layout_problems(config))
    problems.extend(_pass_problems(config))
    return problems


def _fsdp_sections(config: Any) -> list[tuple[str, FSDPRoleConfig]]:
    """``(dotted name, section)`` of every fsdp role, a signal's scoring model included."""
    found = []
    for name, section in config.sections.items():
        if isinstance(section, FSDPRoleConfig):
            found.append((name, section))
        elif isinstance(getattr(section, "model", None), FSDPRoleConfig):
            found.append((f"{name}.model", section.model))
    return found


def _pass_problems(config: Any) -> list[str]:
    """Pass settings a role's engine cannot honour, refused before any model loads."""
    from hfsdk import run_spec
    from hfsdk_backend_common.engine_support import paired_roles

    sections = [
        (name, section)
        for name, section in _fsdp_sections(config)
        if section.micro_batch_tokens is not None or section.packing
    ]
    if not sections:  # nothing to check: the algorithm's spec is not needed
        return []
    spec = run_spec(config)
    kinds = {role.name: role.kind for role in spec.roles}
    # The engine found a token budget over pairs out only at step 1, after the models loaded.
    paired = paired_roles(spec)
    problems = []
    for name, section in sections:
        role = name.split(".")[0]
        kind = kinds.get(role)
        if role in paired and section.micro_batch_tokens is not None:
            problems.append(
                f"{name}.micro_batch_tokens={section.micro_batch_tokens} splits rows by length, "
                f"but {config.algo} trains {role} on preference pairs whose two rows must "
                f"share a pass; unset {name}.micro_batch_tokens and use {name}.micro_batch_size"
            )
        if kind in ("scorer", "score_model") and section.packing:
            problems.append(
                f"{name}.packing: true is not supported by score models (they score unpacked "
                f"rows); set {name}.packing: false"
            )
    return problems


def _lora_problems(config: Any) -> list[str]:
    """LoRA is for the policy: a non-policy fsdp role with ``lora.rank > 0`` is refused."""
    problems = []
    actor = config.sections.get("actor")
    if (
        isinstance(actor, FSDPRoleConfig)
        and actor.lora.enabled
        and (actor.rollout_layout.tp or 1) > 1
    ):
        problems.append(
            f"actor.lora.rank={actor.lora.rank} with actor.rollout_layout.tp="
            f"{actor.rollout_layout.tp}: tensor-parallel generation slices the FSDP shards, which "
            "LoRA's merged weights are not; set actor.rollout_layout.tp: 1"
        )
    refused = [
        (name, section)
        for name, section in _fsdp_sections(config)  # a signal's scoring model too
        if name != "actor" and section.lora.enabled
    ]
    if not refused:  # nothing to say: the algorithm's spec is not needed
        return problems
    from hfsdk import run_spec

    kinds = {role.name: role.kind for role in run_spec(config).roles}
    for name, section in refused:
        # Only a frozen policy (reference, teacher) might want adapters to mirror the actor's
        # base; a critic or reward model has its own weights, which the note would misdescribe.
        note = (
            " (a frozen policy trains nothing; a reference on the actor's model already shares "
            "the actor's base weights)"
            if kinds.get(name.split(".")[0]) == "frozen_policy"
            else ""
        )
        problems.append(
            f"{name}.lora.rank={section.lora.rank}: LoRA adapters train the policy only; "
            f"set {name}.lora.rank: 0{note}"
        )
    return problems


def _rollout_layout_problems(config: Any) -> list[str]:
    """An fsdp actor's ``rollout_layout`` must fit its ranks, its model and the rollout."""
    from hfsdk_backend_fsdp.tp_slices import (
        decoder_problems,
        model_config_dict,
        tp_support_problems,
        world_problem,
    )

    actor = config.sections.get("actor")
    if not isinstance(actor, FSDPRoleConfig):
        return []
    layout = actor.rollout_layout
    if layout.pp != 1:
        return [
            f"actor.rollout_layout.pp={layout.pp}: the fsdp actor generates without pipeline "
            "stages; use pp: 1 (the default)"
        ]
    tg = layout.tp or 1
    rollout = config.sections.get("rollout")
    if tg == 1:
        if isinstance(rollout, HFRolloutConfig) and rollout.decoder == "hfsdk":
            model = model_config_dict(actor.model_path)
            return decoder_problems(model)[:1] if model is not None else []
        return []
    if isinstance(rollout, HFRolloutConfig) and rollout.decoder == "transformers":
        return [
            f"actor.rollout_layout.tp={tg} decodes with the hfsdk decoder, but "
            "rollout.decoder is transformers; set rollout.decoder: auto or "
            "actor.rollout_layout.tp: 1"
        ]
    if type(rollout) is not HFRolloutConfig:
        # Not isinstance: vLLM's config extends the hf one for its sampling keys, but its
        # engine cannot take this actor's slices (they are not HF-named), and failed at step 2.
        return [
            f"actor.rollout_layout.tp={tg} is served by the hf rollout backend only, not "
            f"{getattr(rollout, 'backend', None)!r}; set rollout.backend: hf or "
            "actor.rollout_layout.tp: 1"
        ]
    placement = config.sections.get("placement")
    if placement is not None and placement.mode != "auto":
        problem = world_problem(tg, placement.pools[placement.pool_of("actor")].devices)
        if problem:
            return [problem]
    model = model_config_dict(actor.model_path)
    return tp_support_problems(model, tg)[:1] if model is not None else []


def _mini_batch_problems(config: Any) -> list[str]:
    """``mini_batch_size`` must split evenly over a trained FSDP role's data-parallel ranks,
    in whole preference pairs where its rows come in pairs (the engine's own check, which
    ran only at step 1, after the models loaded).

    Every device of a role's pool is one data-parallel rank under FSDP, so this is known
    from the config alone; ``placement: auto`` decides the ranks later, so there only the
    pairs are checked (as on one rank).
    """
    from hfsdk import TRAINED_KINDS, HfsdkError, run_spec
    from hfsdk_backend_common.engine_support import PAIR_ROWS, check_minibatch_groups, paired_roles

    placement = config.sections.get("placement")
    if placement is None:  # a few sections checked alone: no algorithm, no ranks
        return []
    spec = run_spec(config)
    trained = {role.name for role in spec.roles if role.kind in TRAINED_KINDS}
    paired = paired_roles(spec)
    problems, fixed = [], placement.mode != "auto"
    for role, section in config.sections.items():
        # Only trained roles (policy, value and score-model kinds) split mini-batches.
        if not isinstance(section, FSDPRoleConfig) or role not in trained:
            continue
        devices = placement.pools[placement.pool_of(role)].devices if fixed else 1
        if role in paired:  # whole pairs on every rank implies a multiple of the ranks
            try:
                check_minibatch_groups(role, section.mini_batch_size, devices, PAIR_ROWS)
            except HfsdkError as exc:
                problems.append(str(exc))
        elif section.mini_batch_size % devices:
            problems.append(
                f"{role}.mini_batch_size={section.mini_batch_size} is not divisible by the "
                f"{devices} devices of {role}'s pool {placement.pool_of(role)!r} (one "
                "data-parallel rank each); make it a multiple of the device count"
            )
    return problems
