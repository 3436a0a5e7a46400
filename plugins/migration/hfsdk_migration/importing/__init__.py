"""``hfsdk config import``: a verl, TRL or OpenRLHF config turned into an hfsdk run config.

:func:`read_source` reads what the user has (a YAML/JSON file, a launch
script, a command line; :mod:`.sources`), :func:`import_config` resolves its
OmegaConf interpolations with OmegaConf (:mod:`.verl_compose`), maps every key that has a
counterpart, validates the result as a run config and reports the keys it
could not map (one per line, with the reason). See ``docs/migrating.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from hfsdk import ConfigError
from hfsdk_migration.importing.mapper import Mapper, flatten
from hfsdk_migration.importing.openrlhf import import_openrlhf
from hfsdk_migration.importing.sources import read_flags, read_verl
from hfsdk_migration.importing.trl import import_trl
from hfsdk_migration.importing.verl import import_verl
from hfsdk_migration.importing.verl_compose import resolve

SOURCES: dict[str, Callable[[Mapper, str | None], str]] = {
    "verl": import_verl,
    "trl": import_trl,
    "openrlhf": import_openrlhf,
}

GENERATION_TP_KEYS = {
    "verl": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "trl": "vllm_tensor_parallel_size",
    "openrlhf": "vllm_tensor_parallel_size",
}
"""The source key each importer maps to ``actor.rollout_layout.tp``."""


@attrs.frozen(kw_only=True)
class ImportResult:
    """The hfsdk config (plain data), the unmapped source keys and the source defaults assumed."""

    source: str
    config: dict[str, Any]
    unmapped: tuple[str, ...]
    assumed: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    def to_yaml(self) -> str:
        """The config as YAML under a comment header naming the source and its assumed defaults."""
        import yaml

        header = [f"# hfsdk run config imported from {self.source} by hfsdk config import"]
        if self.assumed:
            header.append(f"# {self.source} defaults assumed for: {', '.join(self.assumed)}")
        if self.unmapped:
            header.append(f"# {len(self.unmapped)} key(s) had no counterpart (printed at import)")
        header.extend(f"# warning: {line}" for line in self.warnings)
        return "\n".join(header) + "\n" + yaml.safe_dump(self.config, sort_keys=False)


def read_source(
    source: str,
    path: str | None,
    arguments: list[str] | tuple[str, ...] = (),
    *,
    verl_config_dir: str | list[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The ``source`` config in ``path`` plus ``arguments``, and warnings about reading it."""
    if source not in SOURCES:
        raise ConfigError(f"unknown config source {source!r}; expected one of {', '.join(SOURCES)}")
    if source == "verl":
        return read_verl(path, list(arguments), config_dir=verl_config_dir, env=env)
    return read_flags(source, path, list(arguments), env=env)


def import_config(
    source: str,
    data: Mapping[str, Any],
    *,
    algo: str | None = None,
    warnings: list[str] | tuple[str, ...] = (),
) -> ImportResult:
    """Map a ``source`` (``verl``, ``trl`` or ``openrlhf``) config into a validated hfsdk config."""
    if source not in SOURCES:
        raise ConfigError(f"unknown config source {source!r}; expected one of {', '.join(SOURCES)}")
    resolved, problems = resolve(data)
    mapper = Mapper(flatten(resolved))
    chosen = SOURCES[source](mapper, algo)
    _drop_unfit_generation_tp(mapper, source)
    config = mapper.out
    from hfsdk import resolve_run_config, with_algorithm_preset

    try:
        # Model paths name the source machine's directories: validated apart from them.
        checked = with_open_length(without_source_paths(config))
        resolve_run_config(chosen, with_algorithm_preset(chosen, checked))
    except ConfigError as exc:
        raise ConfigError(
            f"the {source} config maps to an invalid hfsdk config ({exc}); fix the value in the "
            "source file or pass --algo"
        ) from exc
    return ImportResult(
        source=source,
        config=config,
        unmapped=tuple(mapper.unmapped()),
        assumed=tuple(mapper.defaults_used),
        warnings=(*warnings, *problems, *mapper.notes),
    )


def _drop_unfit_generation_tp(m: Mapper, source: str) -> None:
    """Report a generation tp that does not divide the actor's devices, or that hfsdk's
    vLLM rollout on an FSDP actor or a LoRA actor cannot use, as unmapped.

    Validation leaves layouts out when the model is not on this machine (they are
    checked against its shape), so this one check, which needs no model, is made here:
    otherwise ``config show`` would refuse the written file.
    """
    layout = m.out.get("actor", {}).get("rollout_layout", {})
    tp = layout.get("tp")
    pool = m.out.get("placement", {}).get("pools", {}).get("global", {})
    devices = int(pool.get("devices", 1))
    # vLLM loads whole HF-named weights; an FSDP actor's generation slices are not those.
    vllm_on_fsdp = m.out.get("rollout", {}).get("backend") == "vllm" and (
        m.out.get("actor", {}).get("backend", "fsdp") == "fsdp"
    )
    if tp is None or tp == 1:
        return
    lora = int(m.out.get("actor", {}).get("lora", {}).get("rank", 0)) > 0
    if tp < 1:  # an importer that let it through; the modulo below would divide by it
        raise ConfigError(
            f"{GENERATION_TP_KEYS[source]}={tp} is not valid; expected a positive integer "
            "(the generation's tensor-parallel size): set it to 1 or more in the source"
        )
    if devices % tp == 0 and not vllm_on_fsdp and not lora:
        return
    del layout["tp"]
    if not layout:
        del m.out["actor"]["rollout_layout"]
    if devices % tp:
        why = (
            f"{tp} does not divide the actor's {devices} device(s), where hfsdk generates; "
            "set actor.rollout_layout.tp to a divisor of placement.pools.global.devices"
        )
    elif vllm_on_fsdp:
        why = (
            "hfsdk's vLLM rollout on an FSDP actor generates at tp 1 (set "
            "actor.rollout_layout.tp with rollout.backend: hf, or a megatron actor)"
        )
    else:
        why = (
            "hfsdk generates for a LoRA actor at tp 1: tensor-parallel generation slices the "
            "FSDP shards, which LoRA's merged weights are not"
        )
    m.reject(GENERATION_TP_KEYS[source], why)


def without_source_paths(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without model paths, and without layouts when the model is not here.

    Layouts are checked against the model's shape, which only the model's own
    directory holds; on another machine they are checked when the run starts.
    """
    from pathlib import Path

    paths = [
        v.get("model_path") for v in config.values() if isinstance(v, dict) and v.get("model_path")
    ]
    local = bool(paths) and all(
        (Path(str(p)).expanduser() / "config.json").is_file() for p in paths
    )
    dropped = ("model_path", "tokenizer_path", *(() if local else ("parallel", "rollout_layout")))
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in dropped}
        out[key] = value
    return out


OPEN_LENGTH = 10**9
"""The run length an import that maps none is validated at (:func:`with_open_length`)."""


def with_open_length(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with a run length when the import mapped none, for validation only.

    A source that counts its run in epochs (TRL's ``num_train_epochs``, verl's
    ``total_epochs``, listed as unmapped) leaves the length to the user; hfsdk's default
    would make a cosine warm-up longer than it look like a fault of the source file.
    """
    trainer = config.get("trainer") or {}
    if "total_steps" in trainer:
        return config
    return {**config, "trainer": {**trainer, "total_steps": OPEN_LENGTH}}


def load_source(path: str | Path) -> dict[str, Any]:
    """A YAML or JSON mapping from ``path`` (JSON is YAML, so one reader does both)."""
    from hfsdk import load_yaml

    return load_yaml(path)
