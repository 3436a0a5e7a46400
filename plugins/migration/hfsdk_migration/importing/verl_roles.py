"""verl's role sections mapped to hfsdk's backends: strategies, layouts, engines, models.

``strategy: megatron`` selects the megatron backend with ``megatron.*_parallel_size``
as its ``parallel`` layout; ``rollout.name`` selects the rollout backend and
``rollout.tensor_model_parallel_size`` the actor's generation layout; the model
switches map where the chosen backend has them (its registered config class
says so), and the ``*_offload`` switches are hfsdk's behaviour when off.
"""

from __future__ import annotations

from typing import Any

from hfsdk_migration.importing.mapper import LORA_REGEX, Mapper, as_int, lora_targets
from hfsdk_migration.importing.verl_vision import map_vision_rollout

A = "actor_rollout_ref.actor."
R = "actor_rollout_ref.rollout."
F = "actor_rollout_ref.ref."


def config_fields(kind: str, name: str) -> set[str]:
    """Field names of the config class registered as ``name`` in registry ``kind``."""
    import attrs

    from hfsdk import get_registry

    registry = get_registry(kind)
    if name not in registry:
        return set()
    cls = registry[name].config_cls
    return {f.name for f in attrs.fields(cls)} if cls is not None else set()


def backend_of(strategy: Any) -> str:
    """The hfsdk backend of a verl ``strategy``."""
    return "megatron" if strategy == "megatron" else "fsdp"


def map_strategy(m: Mapper, prefix: str, role: str) -> str:
    """The hfsdk backend for the verl role at ``prefix`` (``fsdp`` or ``megatron``)."""
    strategy = m.get(prefix + "strategy")
    if strategy not in (None, "fsdp", "fsdp2", "megatron"):
        m.reject(prefix + "strategy", "hfsdk backends: fsdp (FSDP2), megatron")
        return "fsdp"
    backend = backend_of(strategy)
    if backend == "megatron":
        m.put(f"{role}.backend", "megatron")
    return backend


_OFFLOAD_REASON = (
    "no counterpart: hfsdk keeps each role's weights, gradients and optimizer state on its "
    "devices (rollout.sleep frees vLLM's memory while the actor trains)"
)


def _offload(m: Mapper, prefix: str) -> None:
    """verl's ``*_offload`` switches: off is hfsdk's behaviour; on is listed with the reason."""
    for key in [k for k in m.flat if k.startswith(prefix) and k.endswith("offload")]:
        if m.get(key) in (True, "true", "True"):
            m.reject(key, _OFFLOAD_REASON)


def map_engine(m: Mapper, prefix: str, role: str, backend: str) -> None:
    """The parallel layout and engine switches of a role (``fsdp_config`` or ``megatron``)."""
    fields = config_fields("training_backends", backend)
    if backend == "megatron":
        section = prefix + "megatron."
        for src, dest in (
            ("tensor_model_parallel_size", "tp"),
            ("pipeline_model_parallel_size", "pp"),
        ):
            if m.has(section + src):
                m.put(f"{role}.parallel.{dest}", m.int(section + src))
        if m.get(section + "sequence_parallel") is True:
            m.reject(
                section + "sequence_parallel",
                "hfsdk's megatron backend refuses sequence parallelism for now",
            )
        for key in ("context_parallel_size", "expert_model_parallel_size"):
            if m.has(section + key) and m.int(section + key) != 1:
                m.reject(section + key, "no counterpart in hfsdk's megatron backend")
        for key in ("virtual_pipeline_model_parallel_size", "expert_tensor_parallel_size"):
            if m.has(section + key):
                m.reject(section + key, "no counterpart in hfsdk's megatron backend")
        if m.get(section + "use_distributed_optimizer") is True:
            m.get(section + "use_distributed_optimizer")
    else:
        section = prefix + ("model.fsdp_config." if role == "critic" else "fsdp_config.")
        if m.has(section + "reshard_after_forward") and "reshard_after_forward" in fields:
            m.put(f"{role}.reshard_after_forward", bool(m.get(section + "reshard_after_forward")))
        if m.has(section + "fsdp_size") and m.int(section + "fsdp_size") == -1:
            m.get(section + "fsdp_size")  # -1: shard over all of the role's ranks, as hfsdk does
    dtype = m.get(section + "dtype")
    if dtype is not None:
        names = {
            "bfloat16": "bfloat16",
            "bf16": "bfloat16",
            "float32": "float32",
            "fp32": "float32",
        }
        if backend == "megatron" and role != "reference" and names.get(str(dtype)) == "bfloat16":
            m.reject(section + "dtype", "hfsdk's megatron backend trains in float32")
        elif str(dtype) in names:
            m.put(f"{role}.dtype", names[str(dtype)])
        else:
            m.reject(section + "dtype", "hfsdk compute dtypes: float32, bfloat16")
    for key in (
        prefix + "ulysses_sequence_parallel_size",
        section + "ulysses_sequence_parallel_size",
    ):
        if m.has(key) and m.int(key) == 1:
            m.get(key)
        elif m.has(key):
            m.reject(key, "no counterpart: hfsdk has no Ulysses sequence parallelism")
    _offload(m, prefix)


def map_model(m: Mapper, prefix: str, role: str, backend: str) -> None:
    """``model.path``, ``tokenizer_path``, checkpointing and padding of one role."""
    fields = config_fields("training_backends", backend)
    if m.flat.get(prefix + "path") == "":
        m.reject(prefix + "path", f"empty: set {role}.model_path")
    elif m.has(prefix + "path"):
        m.put(f"{role}.model_path", str(m.get(prefix + "path")))
    tokenizer = m.get(prefix + "tokenizer_path")
    if tokenizer is not None and tokenizer != m.flat.get(prefix + "path"):
        m.put(f"{role}.tokenizer_path", str(tokenizer))
    switch = prefix + "enable_gradient_checkpointing"
    if m.has(switch) and "gradient_checkpointing" in fields:
        m.put(f"{role}.gradient_checkpointing", bool(m.get(switch)))
    elif m.flat.get(switch):
        m.reject(switch, f"the {backend} backend has no activation-checkpointing switch")
    padding = prefix + "use_remove_padding"
    if m.has(padding) and "remove_padding" in fields:
        m.put(f"{role}.remove_padding", bool(m.get(padding)))


LORA_SETTINGS = ("lora_alpha", "target_modules", "target_parameters", "exclude_modules",
                 "lora_adapter_path")  # fmt: skip
"""verl's LoRA settings beside ``lora_rank`` in a role's ``model`` section (fsdp)."""


def map_lora(m: Mapper, prefix: str, role: str, backend: str) -> None:
    """A role's LoRA: verl's ``model.lora_rank`` (fsdp) -> ``actor.lora``.

    verl's fsdp engines read the flat ``lora_rank``/``lora_alpha``/``target_modules`` (peft's;
    ``all-linear`` is hfsdk's ``['all-linear']``), its megatron engine the ``model.lora.*``
    section. A rank of 0 is LoRA off: nothing is written and its settings are taken. hfsdk
    has LoRA on an fsdp actor only, so a critic's adapters or a megatron actor's are listed.
    """
    rank = m.int(prefix + "lora_rank", 0)
    section = prefix + "lora."
    section_rank = m.int(section + "rank", 0)
    settings = [prefix + key for key in LORA_SETTINGS]
    if section_rank <= 0:
        m.consume(section)  # verl's megatron LoRA section, off
    if rank <= 0 and section_rank <= 0:
        for key in settings:
            m.get(key)  # settings of LoRA that is off
        return
    why = None
    if role != "actor":
        why = (
            f"hfsdk has LoRA only on the actor; its {role} trains the full model (a {role} "
            f"with lora.rank > 0 is refused): set the {role}'s rank to 0 to compare the runs"
        )
    elif backend == "megatron":
        why = (
            "hfsdk's megatron backend has no LoRA (it refuses actor.lora.rank > 0); use "
            "actor.backend: fsdp with actor.lora for it"
        )
    if section_rank > 0:
        section_why = why or (
            "verl's megatron LoRA section (megatron-core module names) on an fsdp actor; "
            "hfsdk's LoRA is actor.lora: set it by hand"
        )
        m.used.difference_update(m.keys(section))  # its rank was read above
        m.group(section, section_why)  # one line for the section's many settings
    if rank > 0 and why is not None:
        m.reject(prefix + "lora_rank", why)
    if rank <= 0 or why is not None:
        for key in settings:
            m.get(key)  # settings of the adapters listed above (or of none)
        return
    _map_actor_lora(m, prefix, rank)


def _map_actor_lora(m: Mapper, prefix: str, rank: int) -> None:
    """An fsdp actor's ``lora_rank > 0`` with its settings, verl's defaults where unset."""
    m.put("actor.lora.rank", rank)
    m.put("actor.lora.alpha", m.num(prefix + "lora_alpha", 16, source_default=True))
    key = prefix + "target_modules"
    targets = lora_targets(key, m.get(key, "all-linear", source_default=True))
    if targets is None:
        m.reject(key, LORA_REGEX)
    else:
        m.put("actor.lora.target_modules", targets)
    if m.flat.get(prefix + "exclude_modules") not in (None, "", []):
        m.reject(
            prefix + "exclude_modules",
            "hfsdk has no exclude_modules (it keeps only a vision tower out); list the modules "
            "to adapt in actor.lora.target_modules",
        )
    if m.flat.get(prefix + "target_parameters") not in (None, "", []):
        m.reject(
            prefix + "target_parameters",
            "hfsdk adapts Linear modules only, not parameters (peft's target_parameters)",
        )
    if m.flat.get(prefix + "lora_adapter_path") not in (None, ""):
        m.reject(
            prefix + "lora_adapter_path",
            "hfsdk starts new adapters (B = 0) and cannot load trained ones: merge the adapter "
            "into the model (peft's merge_and_unload) and set actor.model_path to it",
        )


def map_rollout(m: Mapper, vision: bool = False) -> None:
    """The rollout section: sampling, the engine and its sizes, the generation tp.

    A ``vision`` config (:func:`~hfsdk_migration.importing.verl_vision.is_vision`) gets the
    image rollout instead of verl's engine.
    """
    if vision:
        map_vision_rollout(m, _rollout_backends())
    else:
        _map_engine_rollout(m)
    for key in ("log_prob_use_dynamic_bsz", "log_prob_max_token_len_per_gpu"):
        for prefix in (R, F):
            if m.has(prefix + key):
                m.reject(
                    prefix + key,
                    "hfsdk decides this itself: micro_batch_tokens covers inference passes",
                )


def _map_engine_rollout(m: Mapper) -> None:
    """verl's text rollout: ``rollout.name`` selects hfsdk's rollout backend of that name."""
    for key in ("temperature", "top_p"):
        if m.has(R + key):
            m.put(f"rollout.{key}", m.num(R + key))
    if m.has(R + "top_k"):
        top_k = m.int(R + "top_k")
        m.put("rollout.top_k", max(top_k, 0))  # verl's -1 and hfsdk's 0 both mean "off"
    name = m.get(R + "name")
    backends = _rollout_backends()
    if name in ("hf", "vllm") and name in backends:
        m.put("rollout.backend", name)
    elif name == "vllm":
        m.reject(R + "name", "install hfsdk-plugin-rollout-vllm for rollout.backend=vllm")
    elif name is not None:
        m.reject(R + "name", f"hfsdk rollout backends: {', '.join(sorted(backends))}")
    fields = config_fields("rollout_backends", name) if name in backends else set()
    if "gpu_memory_utilization" in fields and m.has(R + "gpu_memory_utilization"):
        m.put("rollout.gpu_memory_utilization", m.num(R + "gpu_memory_utilization"))
    if "max_num_seqs" in fields and m.has(R + "max_num_seqs"):
        m.put("rollout.max_num_seqs", m.int(R + "max_num_seqs"))
    if "enforce_eager" in fields and m.has(R + "enforce_eager"):
        m.put("rollout.enforce_eager", bool(m.get(R + "enforce_eager")))
    if "sleep" in fields and m.has(R + "free_cache_engine"):
        m.put("rollout.sleep", "auto" if m.get(R + "free_cache_engine") else "off")
    if "dtype" in fields and m.get(R + "dtype") in ("bfloat16", "float16", "float32"):
        m.put("rollout.dtype", m.get(R + "dtype"))
    _generation_tp(m)


def _rollout_backends() -> set[str]:
    from hfsdk import get_registry

    return set(get_registry("rollout_backends"))


def _generation_tp(m: Mapper) -> None:
    """``rollout.tensor_model_parallel_size`` -> ``actor.rollout_layout.tp`` where it fits."""
    key = R + "tensor_model_parallel_size"
    if not m.has(key):
        return
    tg = m.int(key)
    if m.flat.get(A + "strategy") == "megatron":
        t = as_int("tp", m.flat.get(A + "megatron.tensor_model_parallel_size", 1))
        if t % tg:
            m.reject(
                key,
                f"hfsdk's megatron actor generates with a tp dividing its training tp ({t}); "
                "set actor.rollout_layout.tp",
            )
            return
        if m.flat.get(R + "name") == "vllm" and tg not in (1, t):
            m.reject(
                key,
                f"hfsdk's vLLM rollout on a megatron actor (tp {t}) generates with tp 1 or {t}; "
                "set actor.rollout_layout.tp",
            )
            return
    m.put("actor.rollout_layout.tp", tg)
    for other in ("data_parallel_size", "pipeline_model_parallel_size", "expert_parallel_size"):
        if m.has(R + other) and m.int(R + other) == 1:
            m.get(R + other)
