"""The ``rollout_correction`` config section: which registered corrections the actor applies.

``preset`` names a list of corrections (:data:`PRESETS`); ``apply`` adds more,
each a registered name or a mapping ``{name: NAME, <its settings>}``. The older
``algorithm.is_correction: tis|mis`` (with ``is_level``, ``is_cap``) still works:
it is the one-entry list ``[{name: tis|mis, level: is_level, cap: is_cap}]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from hfsdk import ConfigError, help_field

PRESETS: Mapping[str, tuple[Mapping[str, Any], ...]] = MappingProxyType(
    {
        "tis": ({"name": "tis"},),
        "seq_tis": ({"name": "tis", "level": "sequence"},),
        "mis": ({"name": "mis"},),
        "seq_mis": ({"name": "mis", "level": "sequence"},),
        "icepop": ({"name": "icepop"},),
        "geo_rs": ({"name": "geo_rs"},),
        "geo_rs_tis": ({"name": "geo_rs"}, {"name": "tis"}),
        "k3_rs": ({"name": "k3_rs"},),
        "k3_rs_tis": ({"name": "k3_rs"}, {"name": "tis"}),
        "trust_region": ({"name": "trust_region"},),
        "dsv32": ({"name": "dsv32_mask"},),
        "dsv32_tis": ({"name": "dsv32_mask"}, {"name": "tis"}),
    }
)
"""Named lists of corrections (``rollout_correction.preset``); the names are this
plugin's standard corrections."""


def _preset_known(_instance: object, _attribute: attrs.Attribute, value: str | None) -> None:
    if value is not None and value not in PRESETS:
        raise ValueError(
            f"'preset' {value!r} is not a rollout-correction preset; expected one of "
            f"{', '.join(PRESETS)} (or null and a list in rollout_correction.apply)"
        )


@attrs.frozen(kw_only=True)
class RolloutCorrectionConfig:
    """Corrections of the policy loss for tokens the rollout sampled with another policy."""

    preset: str | None = help_field(
        "A named list of corrections: " + ", ".join(PRESETS) + "; null: none (see "
        "docs/async.md, 'Rollout corrections').",
        default=None,
        validator=_preset_known,
    )
    apply: tuple[Any, ...] = help_field(
        "Corrections applied after the preset's, each a registered name (hfsdk list "
        "rollout-corrections) or {name: NAME, <settings>}; weights multiply, masks intersect.",
        factory=tuple,
    )

    def entries(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The preset's corrections, then ``apply``'s, each as ``{name: ..., settings...}``
        with the key a user wrote it under (``apply``'s index counts its own entries only)."""
        out: list[tuple[str, Any]] = [
            ("rollout_correction.preset", entry) for entry in PRESETS.get(self.preset or "", ())
        ]
        for index, item in enumerate(self.apply):
            key = f"rollout_correction.apply[{index}]"
            out.append((key, {"name": item} if isinstance(item, str) else item))
        return out


ResolvedCorrection = tuple[str, Callable[..., Any], Any]


def resolve_rollout_corrections(run_config: Any, registry: Any = None) -> list[ResolvedCorrection]:
    """``(name, fn, config)`` for every correction the run applies, in order.

    ``registry`` is the ``rollout_corrections`` registry, by default
    ``hfsdk.get_registry("rollout_corrections")`` read only when the run applies a
    correction (the kind is this plugin's: with the plugin disabled it does not exist, and a
    run without corrections still resolves to none). Raises :class:`ConfigError` with one
    line naming the bad entry.
    """
    from hfsdk import get_registry, make_converter, structure

    section = run_config.sections.get("rollout_correction") or RolloutCorrectionConfig()
    entries = section.entries()
    algo = run_config.sections.get("algorithm")
    legacy = getattr(algo, "is_correction", "none")
    if legacy != "none":
        if entries:
            raise ConfigError(
                f"algorithm.is_correction={legacy!r} and rollout_correction are both set; "
                "keep one (rollout_correction.apply=[{name: " + legacy + "}] replaces the former)"
            )
        entries = [
            (
                "algorithm.is_correction",
                {"name": legacy, "level": algo.is_level, "cap": algo.is_cap},
            )
        ]
    else:
        _refuse_unread_is_settings(algo)
    if entries and registry is None:
        registry = get_registry("rollout_corrections")
    converter = make_converter()
    resolved: list[ResolvedCorrection] = []
    named: dict[str, str] = {}  # name -> the key that applies it first
    for key, entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfigError(
                f"{key}={entry!r}; expected a correction name or a mapping with a 'name' "
                f"(one of {', '.join(registry)})"
            )
        settings = dict(entry)
        name = settings.pop("name")
        try:
            found = registry[name]
        except Exception as exc:  # UnknownNameError: one line with the close match
            raise ConfigError(f"{key}: {exc}") from None
        config = None
        if found.config_cls is not None:
            config = structure(converter, settings, found.config_cls, path=key)
        elif settings:
            raise ConfigError(f"{key}: correction {name!r} takes no settings; remove them")
        # Corrections compose by multiplying: one named twice would weigh each token twice.
        where = f"rollout_correction.preset={section.preset!r}" if key.endswith("preset") else key
        if name in named:
            fix = (
                "remove rollout_correction.preset and use rollout_correction.apply alone, "
                "listing the preset's other corrections there too"
                if named[name].startswith("rollout_correction.preset")
                else "keep one entry for it in rollout_correction.apply"
            )
            raise ConfigError(
                f"{where} names correction {name!r}, which {named[name]} applies already, so it "
                f"would run twice (its weights multiplied twice); {fix}, with {{name: {name}, "
                "<the settings wanted>}"
            )
        named[name] = where
        resolved.append((name, found.impl, config))
    return resolved


def _refuse_unread_is_settings(algo: Any) -> None:
    """``algorithm.is_cap`` / ``is_level`` are read only with ``algorithm.is_correction``:
    without it they were ignored silently (a preset's ``tis`` kept its own cap)."""
    if algo is None or not attrs.has(type(algo)):
        return
    fields = attrs.fields_dict(type(algo))
    changed = {
        key: getattr(algo, key)
        for key in ("is_cap", "is_level")
        if key in fields and getattr(algo, key) != fields[key].default
    }
    if not changed:
        return
    written = " ".join(
        f"algorithm.{key}={value:g}" if isinstance(value, float) else f"algorithm.{key}={value}"
        for key, value in changed.items()
    )
    cap, level = getattr(algo, "is_cap", 2.0), getattr(algo, "is_level", "token")
    them = "them" if len(changed) > 1 else "it"
    raise ConfigError(
        f"{written}: read only with algorithm.is_correction=tis|mis, which is not set, so "
        f"ignored; write algorithm.is_correction=tis (or mis) with {them}, or put {them} on the "
        f"correction instead: rollout_correction.apply=[{{name: tis, cap: {cap:g}, level: "
        f"{level}}}] (without the preset that names tis, and without algorithm.is_cap/is_level)"
    )


def behaviour_log_probs_needed(run_config: Any) -> bool:
    """Whether the run needs the sampling policy's ``rollout_log_probs`` on every row: a
    correction applies them, or ``trainer.max_mismatch_kl`` watches the gap (this plugin's
    answer to ``hfsdk_behaviour_log_probs_needed``)."""
    trainer = run_config.sections.get("trainer")
    return corrections_requested(run_config) or (
        trainer is not None and trainer.max_mismatch_kl is not None
    )


def sampleless_problems(run_config: Any) -> list[str] | None:
    """A correction or ``trainer.max_mismatch_kl`` in a run whose algorithm samples nothing it
    trains on (no policy, or its spec's ``trains_on_generations`` is false: SFT, DPO, reward
    models): there are no rollout log-probs to correct or compare, so a correction failed the
    first update and the gate watched nothing. Likewise under ``trainer.mode: rollout_only``,
    which trains nothing: no ``old_log_probs`` (π_old) are computed, so a correction corrected
    nothing and the gate never ran, silently."""
    from hfsdk import run_spec

    spec = run_spec(run_config)
    rollout_only = run_config.trainer.mode == "rollout_only"
    if spec.has_policy and spec.trains_on_generations and not rollout_only:
        return None
    algo = run_config.sections.get("algorithm")
    section = run_config.sections.get("rollout_correction")
    asked = [
        key
        for key, set_ in (
            ("algorithm.is_correction", getattr(algo, "is_correction", "none") != "none"),
            ("rollout_correction", section is not None and bool(section.entries())),
            ("trainer.max_mismatch_kl", run_config.trainer.max_mismatch_kl is not None),
        )
        if set_
    ]
    if spec.has_policy and spec.trains_on_generations:  # rollout_only
        return [
            f"{key} has nothing to {'compare' if key.startswith('trainer.') else 'correct'}: "
            "trainer.mode: rollout_only trains nothing, so there is no π_old (old_log_probs) "
            "to compare the rollout with; remove the setting, or use trainer.mode: train"
            for key in asked
        ] or None
    return [
        f"{key} has nothing to {'compare' if key.startswith('trainer.') else 'correct'}: "
        f"algorithm {run_config.algo!r} samples nothing (it trains on the dataset's own rows, "
        "so no rollout log-probs ever reach its update); remove it"
        for key in asked
    ] or None


def behaviour_source_problems(run_config: Any, backends: Any) -> list[str] | None:
    """Under ``trainer.pipeline: sync`` without a rollout pool only the rollout backend gives
    ``rollout_log_probs``: one that reports none would fail the first update (a correction)
    or leave ``trainer.max_mismatch_kl`` watching nothing, silently."""
    from hfsdk import ROLLOUT_POOL, default_rollout_backend

    if not behaviour_log_probs_needed(run_config) or run_config.trainer.pipeline != "sync":
        return None
    if run_config.trainer.mode == "train_only":  # the dumped rollouts are the source
        return None  # (the run records plugin checks that they hold the log-probs)
    if run_config.trainer.mode == "rollout_only":  # refused whole by sampleless_problems:
        return None  # its advice (a pipeline) would be one rollout_only refuses too
    if ROLLOUT_POOL in run_config.placement.pools:  # its replicas report them
        return None
    name = run_config.rollout.backend or default_rollout_backend(backends)
    entry = backends.get(name)
    if entry is None or entry.impl.reports_log_probs:
        return None
    asks = (
        "rollout_correction / algorithm.is_correction"
        if corrections_requested(run_config)
        else "trainer.max_mismatch_kl"
    )
    return [
        f"{asks} reads the rollout's log-probs, which rollout backend {name!r} does not "
        "report under trainer.pipeline=sync; use rollout.backend=vllm, a pipeline "
        "(trainer.pipeline=one_step_off) or a rollout pool, or drop the setting"
    ]


def corrections_requested(run_config: Any) -> bool:
    """Whether the run corrects off-policy tokens (it then needs behaviour log-probs)."""
    section = run_config.sections.get("rollout_correction")
    algo = run_config.sections.get("algorithm")
    return bool(section is not None and section.entries()) or (
        getattr(algo, "is_correction", "none") != "none"
    )
