"""The reference as the LoRA actor's base model: no second copy of the weights.

A LoRA actor's base weights are frozen, so the reference policy (the model the
actor started from) is the actor's own module with its adapters disabled. When
the reference role runs in the same process as such an actor (fused
colocation, the default, with the policy role built first — every algorithm
declares it first) and names the same model directory, its worker serves
``compute_ref_log_prob`` from the actor's engine through :class:`BaseOfLoraActor`
instead of loading the model again (the reference of a LoRA actor is its base, as
computed by the actor, so a second copy's memory is never spent). It then computes in
the actor's ``dtype``, attention kernel, device and inference passes (rows or token
budget, packing, padding removal); where the reference section asks for others
(:func:`mismatch`), a warning names them: ``placement.colocation: separate`` gives it a
copy of its own, computed as configured. Otherwise it builds its own reference engine
(the same numbers where the settings agree: adapters start at zero, the base never
changes).
"""

from __future__ import annotations

import logging
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfsdk import Batch

if TYPE_CHECKING:
    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

log = logging.getLogger(__name__)

_LORA_ACTORS: dict[str, weakref.ref[ActorEngine]] = {}
"""This process's LoRA actors by resolved model directory."""


def _key(model_path: str | Path) -> str:
    return str(Path(model_path).resolve())


def offer(engine: ActorEngine) -> None:
    """Make a LoRA actor's base model available to a reference in this process."""
    if engine.lora:
        _LORA_ACTORS[_key(engine.model_path)] = weakref.ref(engine)


def _yaml(value: object) -> str:
    """``value`` as the config file spells it (``true``, ``null``)."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value)


def _rows_key(config: FSDPRoleConfig) -> tuple[str, int]:
    """The key that sets the rows of an inference pass, and its value."""
    if config.forward_micro_batch_size is not None:
        return "forward_micro_batch_size", config.forward_micro_batch_size
    return "micro_batch_size", config.micro_batch_size


def mismatch(actor: ActorEngine, reference: FSDPRoleConfig) -> str | None:
    """Why the reference configured as ``reference`` would not compute as ``actor``'s base
    does (``None``: it would), every difference named. The shared base runs in the actor's
    compute dtype, attention kernel, device and inference passes; a reference of its own
    runs in its own."""
    import torch

    reasons = []
    actor_dtype = actor.config.dtype
    if reference.dtype != actor_dtype:
        reasons.append(f"reference.dtype={reference.dtype} but actor.dtype={actor_dtype}")
    # None: the model's default kernel (a frozen role keeps it under "auto").
    wanted = None if reference.attn_implementation == "auto" else reference.attn_implementation
    used = actor._attn_implementation()
    if wanted != used:
        reasons.append(
            f"reference.attn_implementation={reference.attn_implementation} but the actor "
            f"computes with {used or 'the model default'} attention"
        )
    # Compared as resolved: "auto" and "cpu" are the same device on a machine without CUDA.
    auto = "cuda" if torch.cuda.is_available() else "cpu"
    device = auto if reference.device == "auto" else reference.device
    if device != actor.device.type:
        reasons.append(
            f"reference.device={reference.device} but the actor computes on {actor.device.type}"
        )
    # How rows are grouped into passes: the same numbers up to float rounding, but not the
    # memory the reference section was sized for.
    for key in ("micro_batch_tokens", "packing", "remove_padding"):
        mine, theirs = getattr(reference, key), getattr(actor.config, key)
        if mine != theirs:
            reasons.append(f"reference.{key}={_yaml(mine)} but actor.{key}={_yaml(theirs)}")
    # Row counts matter only without a token budget (which replaces them).
    (mine_key, rows), (their_key, their_rows) = _rows_key(reference), _rows_key(actor.config)
    budgets = (reference.micro_batch_tokens, actor.config.micro_batch_tokens)
    if budgets == (None, None) and rows != their_rows:
        reasons.append(f"reference.{mine_key}={rows} but actor.{their_key}={their_rows}")
    return "; ".join(reasons) or None


def find(
    model_path: str | Path, process_group: Any, reference: FSDPRoleConfig
) -> ActorEngine | None:
    """The live LoRA actor of ``model_path`` in this process on the same ranks, if any; a
    warning when ``reference`` asks for other settings than its base computes in."""
    ref = _LORA_ACTORS.get(_key(model_path))
    engine = ref() if ref is not None else None
    if engine is None:
        return None
    if process_group is not None and engine.dp.group is not None:
        import torch.distributed as dist

        # The same ranks in the same order: every rank's reference call runs the actor's
        # (collective) forward at the same time.
        if dist.get_process_group_ranks(process_group) != dist.get_process_group_ranks(
            engine.dp.group
        ):
            return None
    reason = mismatch(engine, reference)
    if reason is not None:  # shared still: a second copy of the model is what LoRA avoids
        log.warning(
            "the reference is the LoRA actor's base and computes as the actor does, not as "
            "its own section says (%s); set them alike, or placement.colocation: separate "
            "for a reference of its own",
            reason,
        )
    return engine


class BaseOfLoraActor:
    """The reference role's engine when it is the LoRA actor's base (see the module doc).

    Checkpoints hold nothing for it: the base is the model directory, which
    the actor's checkpoint does not change.
    """

    shares_actor_base = True

    def __init__(self, actor: ActorEngine) -> None:
        self.actor = actor

    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs`` with the actor's adapters disabled."""
        return self.actor.compute_ref_log_prob(batch)

    def save_checkpoint(self, directory: str | Path) -> Path:
        """Nothing to write but the directory: the reference is the frozen base model."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def load_checkpoint(self, directory: str | Path) -> None:
        """Nothing to read (see :meth:`save_checkpoint`)."""

    def export_hf(self, directory: str | Path) -> Path:
        """The base model (the actor's weights without its adapters) in HF format in
        ``directory``, as a reference of its own would write itself (every rank must call)."""
        return self.actor.export_base_hf(directory)
