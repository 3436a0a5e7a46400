"""The run config: one section per concern, each an attrs class from its owner.

A run config is composed for one algorithm from the config classes that the
registries hold:

======================  ==============================================================
section                 config class
======================  ==============================================================
``algorithm``           the algorithm's (``hfsdk list algorithms``)
``advantage``           the selected ``algorithm.advantage_estimator``'s
``policy_loss``         the selected ``algorithm.policy_loss``'s
``value_loss``          the selected ``algorithm.value_loss``'s (algorithms with a critic)
``actor``, ``critic``…  one per model role of the algorithm's spec, the class of the
                        role's ``backend`` (default: the backend declared default for
                        the role's kind)
``reward``, ``cost``…   roles of kind ``scorer``: signal functions and/or a model
``rollout``             the class of ``rollout.backend`` (default: the declared default)
``trainer``, ``data``,  the classes ``hfsdk_register_config_sections`` registers: the
``placement``, …        core's (``trainer``, ``data``, ``placement``,
                        ``rollout_correction``) and the plugins' (``hfsdk list
                        config-sections``)
======================  ==============================================================

Names inside sections are resolved first (so ``algorithm.advantage_estimator=rloo``
switches the ``advantage`` section's class), then every section is structured
and validated; all problems are reported together, each with its dotted key."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk.core.backends import default_rollout_backend, default_training_backend
from hfsdk.core.config.converter import make_converter, structure, unstructure
from hfsdk.core.config.loader import apply_overrides, load_yaml
from hfsdk.core.config.rollout_sections import missing_plugin_line, unread_key_line
from hfsdk.core.config.signal_config import SignalConfig
from hfsdk.core.errors import ConfigError, HfsdkError
from hfsdk.core.plugin_manager import HfsdkPluginManager, call_each, get_plugin_manager
from hfsdk.core.registry import Registry, closest_match

if TYPE_CHECKING:
    from hfsdk.core.algorithm import AlgorithmConfig
    from hfsdk.core.data.data_config import DataConfig
    from hfsdk.core.role_config import RolloutConfig
    from hfsdk.core.trainer.placement_config import PlacementConfig
    from hfsdk.core.trainer.trainer_config import TrainerConfig


def section_classes(pm: HfsdkPluginManager | None = None) -> dict[str, type]:
    """The top-level sections every run config has, from ``hfsdk_register_config_sections``
    (``trainer``, ``data``, ... and what plugins contribute), in name order."""
    registry = (pm or get_plugin_manager()).registry("config_sections")
    return {name: registry[name].impl for name in registry}


@attrs.frozen(kw_only=True)
class RunConfig:
    """A resolved, validated run config; sections are attributes (``cfg.actor.optim.lr``).

    It pickles (every section is an importable attrs class), so it can be sent
    to workers as a whole."""

    algo: str
    sections: Mapping[str, Any] = attrs.field(converter=lambda s: MappingProxyType(dict(s)))

    # Typed views of the sections every run has; role sections (``actor``, ``critic``, ...)
    # and plugin-contributed ones are reached by name (``config.sections[name]``).
    @property
    def trainer(self) -> TrainerConfig:
        """The ``trainer`` section."""
        return self.sections["trainer"]

    @property
    def data(self) -> DataConfig:
        """The ``data`` section."""
        return self.sections["data"]

    @property
    def placement(self) -> PlacementConfig:
        """The ``placement`` section."""
        return self.sections["placement"]

    @property
    def algorithm(self) -> AlgorithmConfig:
        """The ``algorithm`` section (the algorithm's own config class)."""
        return self.sections["algorithm"]

    @property
    def rollout(self) -> RolloutConfig:
        """The ``rollout`` section (the selected rollout backend's config class)."""
        return self.sections["rollout"]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            sections = object.__getattribute__(self, "sections")
        except AttributeError:  # not initialised yet (unpickling)
            raise AttributeError(name) from None
        if name in sections:
            return sections[name]
        raise AttributeError(f"run config has no section {name!r}; sections: {list(sections)}")

    def __getstate__(self) -> dict[str, Any]:
        return {"algo": self.algo, "sections": dict(self.sections)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "algo", state["algo"])
        object.__setattr__(self, "sections", MappingProxyType(state["sections"]))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what ``config.yaml`` in a run directory holds)."""
        converter = make_converter()
        sections = {name: unstructure(converter, s) for name, s in self.sections.items()}
        return {"algo": self.algo, **sections}

    def to_yaml(self) -> str:
        """The config as YAML, sections in a stable order."""
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def _section(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"config section {name!r} must be a mapping, got {value!r}")
    return value


DEFAULT_ENTRIES: Mapping[tuple[str, str], str] = {
    ("policy_losses", "ppo_clip"): "hfsdk-plugin-policy-losses",
    ("policy_losses", "reinforce"): "hfsdk-plugin-policy-losses",
    **{
        ("kl_estimators", name): "hfsdk-plugin-policy-losses"
        for name in ("k1", "abs", "k2", "k3", "k3_clamped", "low_var_kl")
    },
}
"""(registry kind, name) of the entries default plugins register that a config names by
default -> the distribution: without it loaded, the line says what to install."""


def _lookup(registry: Registry, name: Any, key: str) -> Any:
    if not isinstance(name, str):
        raise ConfigError(f"config key {key!r} must be a name, got {name!r}")
    try:
        return registry[name]
    except HfsdkError as exc:
        distribution = DEFAULT_ENTRIES.get((registry.kind, name))
        if distribution is not None:  # not a typo: its plugin is missing, disabled or broken
            raise ConfigError(
                f"config key {key!r}: {name!r} comes with {distribution}, which is not "
                "installed or is disabled (HFSDK_DISABLE_PLUGINS / HFSDK_LOAD_PLUGINS); pip "
                f"install {distribution} ({exc})"
            ) from None
        same = [n for n in registry if n.lower() == name.lower()]  # closest_match counts case
        hint = f"; did you mean {same[0]!r}?" if same and "did you mean" not in str(exc) else ""
        raise ConfigError(f"config key {key!r}: {exc}{hint}") from None


class _Composer:
    """Collects section schemas and errors while resolving one config."""

    def __init__(self, pm: HfsdkPluginManager) -> None:
        self.registry_of: Callable[[str], Registry] = pm.registry
        self.converter = make_converter()
        self.errors: list[str] = []
        self.sections: dict[str, Any] = {}

    def add(self, name: str, cls: type | None, data: dict[str, Any]) -> Any:
        if cls is None:
            if data:
                self.errors.append(
                    f"config section {name!r} is given but the selected implementation takes "
                    f"no settings; remove it"
                )
            return None
        try:
            value = structure(self.converter, data, cls, path=name)
        except ConfigError as exc:
            self.errors.append(str(exc))
            return None
        self.sections[name] = value
        return value

    def named(self, section: str, kind: str, key: str, name: Any, data: dict[str, Any]) -> Any:
        try:
            entry = _lookup(self.registry_of(kind), name, key)
        except ConfigError as exc:
            self.errors.append(str(exc))
            return None
        return self.add(section, entry.config_cls, data)

    def backend_for(self, kind: str) -> str | None:
        """The training backend declared default for role ``kind`` (errors are collected)."""
        try:
            return default_training_backend(self.registry_of("training_backends"), kind)
        except ConfigError as exc:
            self.errors.append(str(exc))
            return None

    def model_role(self, role: str, kind: str, data: dict[str, Any]) -> Any:
        """A model role's section, structured with its backend's config class."""
        backend = data.get("backend") or self.backend_for(kind)
        if backend is None:
            return None
        data = {**data, "backend": backend}
        return self.named(role, "training_backends", f"{role}.backend", backend, data)

    def rollout_subsections(
        self, rollout: dict[str, Any], classes: Mapping[str, type]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The rollout data without its plugins' sub-sections, and those sub-sections built
        (``rollout.multi_turn`` with the class its plugin registered)."""
        rest: dict[str, Any] = {}
        built: dict[str, Any] = {}
        for key, value in rollout.items():
            cls = classes.get(key)
            if cls is None:
                if line := missing_plugin_line(f"rollout.{key}"):
                    self.errors.append(line)
                else:
                    rest[key] = value
                continue
            value = {} if value is None else value
            try:
                built[key] = structure(self.converter, value, cls, path=f"rollout.{key}")
            except ConfigError as exc:
                self.errors.append(str(exc))
        # Every installed plugin's sub-section is there (its defaults when not given), so
        # `config show` and a run's config.yaml list all settings, as for the rest.
        for key, cls in classes.items():
            if key not in built and key not in rollout:
                built[key] = structure(self.converter, {}, cls, path=f"rollout.{key}")
        return rest, built

    def signal(self, role: str, data: dict[str, Any]) -> None:
        data = dict(data)
        model = data.pop("model", None)
        signal = self.add(role, SignalConfig, data)
        if model is None or signal is None:
            return
        if not isinstance(model, dict):
            self.errors.append(f"config section '{role}.model' must be a mapping, got {model!r}")
            return
        path = f"{role}.model"
        structured = self.model_role(path, "scorer", model)
        self.sections.pop(path, None)
        if structured is not None:
            self.sections[role] = attrs.evolve(signal, model=structured)


def check_reward_function_names(config: RunConfig, pm: HfsdkPluginManager | None = None) -> None:
    """Every registered name a signal section gives (not ``module:function`` or a file,
    which are not run here) is registered; else one :class:`ConfigError` line that also
    names the plugins that failed to load (the name may be one of theirs).

    ``hfsdk config show`` calls it; a run finds the same when it loads the functions."""
    registry = (pm or get_plugin_manager()).registry("reward_functions")
    for role, section in config.sections.items():
        if not isinstance(section, SignalConfig):
            continue
        for index, function in enumerate(section.functions):
            if function.name is None or ":" in function.name:
                continue
            try:
                registry[function.name]
            except HfsdkError as exc:
                raise ConfigError(f"config key '{role}.functions[{index}].name': {exc}") from None


def with_wandb_moved(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with an old ``trainer.wandb`` moved to ``wandb`` (``wandb.*`` wins;
    applied per layer, so a later layer wins: :func:`~hfsdk.core.config.loader.parse_override`).

    Where the wandb settings were before a plugin's ``wandb`` section held them: the configs
    and run directories (config.yaml, also when a run resumes) written then still work."""
    data, trainer = dict(data), data.get("trainer")
    if isinstance(trainer, dict) and "wandb" in trainer:
        data["trainer"] = {k: v for k, v in trainer.items() if k != "wandb"}
        old, new = trainer["wandb"], data.get("wandb")
        both = isinstance(old, dict) and isinstance(new, dict)
        data["wandb"] = {**old, **new} if both else (old if new is None else new)
    return data


def resolve_run_config(
    algo: str | None, data: Mapping[str, Any] | None = None, *, pm: HfsdkPluginManager | None = None
) -> RunConfig:
    """Compose and validate the run config of ``algo`` from plain ``data``.

    ``algo`` may also come from ``data["algo"]``; both given must agree. Every problem
    is collected and raised together as one :class:`ConfigError`."""
    pm = pm or get_plugin_manager()
    registry_of = pm.registry
    data = with_wandb_moved(data or {})
    given = data.pop("algo", None)
    if algo and given is not None and given != algo:  # which one was meant is not ours to guess
        raise ConfigError(f"--algo {algo!r} disagrees with algo: {given!r} in the config file or "
                          "an override (algo is the algorithm's name, never a section or role); "
                          "they must agree: drop one of them")  # fmt: skip
    algo = algo or given
    if not algo:
        names = ", ".join(registry_of("algorithms")) or "(none installed)"
        raise ConfigError(f"no algorithm given; pass --algo NAME (installed: {names})")
    spec = _lookup(registry_of("algorithms"), algo, "algo").impl
    composer = _Composer(pm)

    algorithm = composer.add("algorithm", spec.config_cls, _section(data, "algorithm"))
    try:
        spec = spec.for_run(algorithm)  # roles the algorithm section names, if any
    except ConfigError as exc:
        composer.errors.append(str(exc))
    roles = spec.role_names
    from hfsdk.core.algorithm import AlgorithmConfig

    # Only a policy-training algorithm's section has the RL settings (AlgorithmConfig).
    rl = algorithm if isinstance(algorithm, AlgorithmConfig) else None
    # The estimator and loss sections the algorithm uses -> (registry kind, the algorithm
    # key naming the entry whose config class the section has).
    used: dict[str, tuple[str, str]] = {}
    if rl is not None:
        # Programs that train on given responses (SFT, DPO) estimate no advantages: None.
        if rl.advantage_estimator is not None:
            used["advantage"] = ("advantage_estimators", "advantage_estimator")
        used["policy_loss"] = ("policy_losses", "policy_loss")
        if hasattr(algorithm, "value_loss"):
            used["value_loss"] = ("value_losses", "value_loss")
    for name, (kind, key) in used.items():
        value = getattr(algorithm, key)
        composer.named(name, kind, f"algorithm.{key}", value, _section(data, name))
    if rl is not None:
        try:
            _lookup(registry_of("kl_estimators"), rl.kl_estimator, "algorithm.kl_estimator")
        except ConfigError as exc:
            composer.errors.append(str(exc))

    for role in spec.roles:
        section = _section(data, role.name)
        if role.kind == "scorer":
            composer.signal(role.name, section)
        else:
            composer.model_role(role.name, role.kind, section)
    rollout = _section(data, "rollout")
    try:
        rollout_backend = rollout.get("backend") or default_rollout_backend(
            registry_of("rollout_backends")
        )
    except ConfigError as exc:
        composer.errors.append(str(exc))
    else:
        rollout = {**rollout, "backend": rollout_backend}
        entry = registry_of("rollout_backends").get(rollout_backend)
        cls = entry.config_cls if entry is not None else None
        if attrs.has(cls) and "max_prompt_length" in attrs.fields_dict(cls):
            rollout = _derive_rollout_prompt_length(data, rollout, pm)
        rollout, subsections = composer.rollout_subsections(rollout, _rollout_section_classes(pm))
        value = composer.named(
            "rollout", "rollout_backends", "rollout.backend", rollout_backend, rollout
        )
        if value is not None:
            composer.sections["rollout"] = attrs.evolve(value, subsections=subsections)
    top_level = section_classes(pm)
    for name, cls in top_level.items():
        composer.add(name, cls, _section(data, name))
    trainer = composer.sections.get("trainer")
    if trainer is not None:
        from hfsdk.core.trainer.tracking import logger_problems

        composer.errors.extend(logger_problems(trainer.loggers, registry_of("trackers")))

    known = {"algorithm", "rollout", *roles, *top_level, *used}
    for key in data:
        unused = _unused_loss_section(key, data[key], used, algo, rl)
        if unused:
            composer.errors.append(unused)
        elif key in _LOSS_SECTIONS:
            continue
        elif key not in known:
            if line := missing_plugin_line(str(key)):  # set, but its plugin is not loaded
                composer.errors.append(line)
                continue
            close = closest_match(str(key), sorted(known))
            hint = f"; did you mean {close!r}?" if close else ""
            composer.errors.append(
                f"unknown config section {key!r} for algorithm {algo!r}{hint} "
                f"(sections: {', '.join(sorted(known))})"
            )
    placement = composer.sections.get("placement")
    for role in placement.roles if placement is not None else ():
        if role not in roles:
            composer.errors.append(
                f"placement.roles names {role!r}, which is not a role of {algo!r}; "
                f"roles: {', '.join(roles)}"
            )
    if composer.errors:
        raise ConfigError("; ".join(composer.errors))

    config = RunConfig(algo=algo, sections=composer.sections)
    if unread := unread_key_line(config, top_level):
        raise ConfigError(unread)
    _validate_across_sections(pm, config)
    return config


_LOSS_SECTIONS = ("advantage", "policy_loss", "value_loss")


def _unused_loss_section(key: str, value: Any, used: Mapping, algo: str, rl: Any) -> str | None:
    """One line when ``key`` sets an estimator's or a loss's settings that ``algo`` never
    composes (they would be dropped without a word); ``None`` when it is used or unset."""
    if key not in _LOSS_SECTIONS or key in used or not value:
        return None
    setting = ", ".join(f"{key}.{name}" for name in value) if isinstance(value, dict) else key
    if rl is None:
        why = (
            "trains no policy (its 'algorithm' section has no RL settings: no advantage "
            "estimator, policy loss, value loss or KL)"
        )
    elif key == "advantage":
        why = "estimates no advantages (algorithm.advantage_estimator is unset)"
    else:  # value_loss: the only other section a policy-training algorithm may not use
        why = "trains no critic (it has no algorithm.value_loss)"
    return f"{setting}: algorithm {algo!r} {why}, so these settings would do nothing; remove them"


def _validate_across_sections(pm: HfsdkPluginManager, config: RunConfig) -> None:
    problems: list[str] = []
    for answer in call_each(pm.hook.hfsdk_validate_config, ConfigError, config=config):
        problems += [answer] if isinstance(answer, str) else [str(m) for m in answer or ()]
    if problems:
        raise ConfigError("; ".join(problems))


def load_run_config(
    algo: str | None,
    config_file: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    base: Mapping[str, Any] | None = None,
    file_data: Mapping[str, Any] | None = None,
) -> RunConfig:
    """YAML file (optional; ``file_data``: its mapping, already read) + dotted overrides -> a
    validated :class:`RunConfig`.

    A config without training data runs the built-in default task; the
    algorithm's preset (``AlgorithmSpec.preset``, on top of the default task's
    ``hfsdk.Task.preset``, see ``hfsdk.core.config.presets``) fills the keys the user
    did not set.
    ``base`` (a built-in task's settings) goes under the file and the overrides."""
    from hfsdk.core.config.presets import deep_merge

    data = load_yaml(config_file) if config_file and file_data is None else dict(file_data or {})
    layers = [(base or {}, "the task's preset"), (data, f"config file {config_file!r}")]
    # The rollout's prompt length follows from data.max_prompt_length: each layer's
    # rollout.max_prompt_length (older configs) becomes that, or is refused if it disagrees.
    extra = _context_extra(apply_overrides(deep_merge(layers[0][0], data), overrides))
    data = {}
    for layer, where in layers:
        data = deep_merge(data, _prompt_length_layer(with_wandb_moved(layer), extra, where))
    overrides = _prompt_length_overrides(overrides, extra)
    data = apply_overrides(defaults_under_overrides(data, overrides), overrides)
    return resolve_run_config(algo, with_algorithm_preset(algo or data.get("algo"), data))


def _context_extra(
    data: Mapping[str, Any], pm: HfsdkPluginManager | None = None
) -> tuple[int, str]:
    """What a turn's context holds beyond the prompt and the key that sets it: a rollout
    sub-section's response budget (multi-turn rollouts), else ``(0, "")``."""
    from hfsdk.core.config.rollout_sections import raw_response_budget

    classes = _rollout_section_classes(pm or get_plugin_manager())
    converter = make_converter()
    budget = raw_response_budget(
        data.get("rollout"), classes, lambda d, c: structure(converter, d, c)
    )
    return budget if budget is not None else (0, "")


def _rollout_section_classes(pm: HfsdkPluginManager) -> dict[str, type]:
    """Name -> config class of each contributed rollout sub-section."""
    return {name: entry.impl for name, entry in pm.registry("rollout_sections").items()}


def _prompt_length_rule(extra: tuple[int, str]) -> str:
    tokens, key = extra
    return f"data.max_prompt_length + {key} ({tokens})" if tokens else "data.max_prompt_length"


def _prompt_length_layer(
    layer: dict[str, Any], context_extra: tuple[int, str], where: str
) -> dict[str, Any]:
    """``layer`` with its rollout.max_prompt_length turned into data.max_prompt_length."""
    extra, extra_key = context_extra
    rollout = layer.get("rollout")
    if not isinstance(rollout, dict) or "max_prompt_length" not in rollout:
        return layer
    given = rollout["max_prompt_length"]
    section = layer.get("data")
    prompt = section.get("max_prompt_length") if isinstance(section, dict) else None
    if any(type(v) is not int for v in (given, 0 if prompt is None else prompt)):  # bool too
        return layer  # its own validator names the key and type (the sum below would crash)
    result = {**layer, "rollout": {k: v for k, v in rollout.items() if k != "max_prompt_length"}}
    if prompt is not None:
        if prompt + extra != given:
            raise ConfigError(
                f"{where}: rollout.max_prompt_length={given} disagrees with "
                f"data.max_prompt_length={prompt}; it follows from them "
                f"({_prompt_length_rule(context_extra)}): remove rollout.max_prompt_length"
            )
        return result
    if given - extra < 1:
        raise ConfigError(
            f"{where}: rollout.max_prompt_length={given} leaves no room for a prompt beside "
            f"{extra_key}={extra}; set data.max_prompt_length (the widest prompt) instead"
        )
    if not isinstance(section, dict) and section is not None:
        return result  # a bad data section: its own error says so
    result["data"] = {**(section or {}), "max_prompt_length": given - extra}
    return result


def _prompt_length_overrides(
    overrides: list[str] | tuple[str, ...], extra: tuple[int, str]
) -> list[str]:
    """The command line's overrides with rollout.max_prompt_length=N (or ``rollout={...}``
    holding it: kept, it then agrees) as data.max_prompt_length."""
    keys = ("rollout", "rollout.max_prompt_length", "data", "data.max_prompt_length")
    layer = apply_overrides({}, [t for t in overrides if t.partition("=")[0].strip() in keys])
    converted = _prompt_length_layer(layer, extra, "the command line")
    data = converted.get("data")
    if converted is layer or not isinstance(data, dict):  # none, or not a number: for its error
        return list(overrides)
    rest = [t for t in overrides if t.partition("=")[0].strip() != "rollout.max_prompt_length"]
    return [*rest, f"data.max_prompt_length={data['max_prompt_length']}"]


def _derive_rollout_prompt_length(
    data: Mapping[str, Any], rollout: dict[str, Any], pm: HfsdkPluginManager
) -> dict:
    """``rollout`` with max_prompt_length = data.max_prompt_length (+ the multi-turn budget),
    unless given (:func:`~hfsdk.core.trainer.input_checks.check_prompt_length` then holds it
    to that)."""
    from hfsdk.core.data.data_config import DataConfig

    extra, _key = _context_extra(data, pm)
    section = data.get("data")
    prompt = section.get("max_prompt_length") if isinstance(section, Mapping) else None
    if (prompt is None and not extra) or "max_prompt_length" in rollout:
        return rollout
    prompt = DataConfig().max_prompt_length if prompt is None else prompt
    if not isinstance(prompt, int) or isinstance(prompt, bool) or prompt < 1:
        return rollout  # its own validator names the type or the range (once: the user's key)
    return {**rollout, "max_prompt_length": prompt + extra}


def defaults_under_overrides(
    data: dict[str, Any], overrides: list[str] | tuple[str, ...]
) -> dict[str, Any]:
    """``data`` with each map-valued setting that a dotted override reaches into filled with
    its default first: ``placement.pools.rollout.devices=2`` adds the ``rollout`` pool beside
    the default ``global`` one instead of replacing the whole map."""
    result = dict(data)
    core = section_classes()
    for text in overrides:
        keys = text.partition("=")[0].strip().split(".")
        cls: Any = core.get(keys[0])
        for depth in range(1, len(keys) - 1):
            field = attrs.fields_dict(cls).get(keys[depth]) if attrs.has(cls) else None
            if field is None:
                break
            default = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                if default.takes_self:
                    break
                default = default.factory()
            if attrs.has(type(default)):
                cls = type(default)
                continue
            if isinstance(default, dict) and default:
                _fill(result, keys[:depth], keys[depth], default)
            break
    return result


def _fill(data: dict[str, Any], path: list[str], name: str, default: dict[str, Any]) -> None:
    """Set ``data[path...][name]`` to ``default`` (as plain values) unless it is set."""
    node = data
    for key in path:
        child = node.get(key)
        if child is not None and not isinstance(child, dict):
            return  # not a section: the override's own error says so
        node[key] = node = dict(child or {})
    if name not in node:
        node[name] = {k: attrs.asdict(v) if attrs.has(type(v)) else v for k, v in default.items()}


def with_algorithm_preset(
    algo: str | None, data: Mapping[str, Any], *, pm: HfsdkPluginManager | None = None
) -> dict[str, Any]:
    """``data`` on top of ``algo``'s default-task preset (unchanged for other runs).

    Each preset section is applied to the config class its section resolves to
    (a role's or the rollout's selected backend — the user's ``backend``, else
    the declared default — the algorithm's config class, the core sections'
    classes): the keys that class lacks are left out, so a preset never names a
    backend and a new backend takes the keys it shares."""
    from hfsdk.core.config.presets import uses_default_task, with_default_task_preset

    pm = pm or get_plugin_manager()
    spec_entry = pm.registry("algorithms").get(algo) if isinstance(algo, str) else None
    if spec_entry is None or not uses_default_task(data):
        return dict(data)  # unknown names are reported by resolve_run_config
    spec = _configured_spec(spec_entry.impl, data, pm)
    kinds = {role.name: role.kind for role in spec.roles}
    core = section_classes(pm)

    def chosen_backend(section: str) -> Any:
        given = data.get(section)
        return given.get("backend") if isinstance(given, Mapping) else None

    def section_class(section: str) -> type | None:
        try:
            if section == "rollout":
                registry = pm.registry("rollout_backends")
                name = chosen_backend(section) or default_rollout_backend(registry)
            elif section in kinds and kinds[section] != "scorer":
                registry = pm.registry("training_backends")
                name = chosen_backend(section) or default_training_backend(registry, kinds[section])
            elif section == "algorithm":
                return spec.config_cls
            else:
                return core.get(section)
        except ConfigError:
            return None  # resolve_run_config reports it
        entry = registry.get(name) if isinstance(name, str) else None
        return entry.config_cls if entry is not None else None

    return with_default_task_preset(
        spec.preset, data, section_class, task_preset=_default_task_preset(pm)
    )


def _configured_spec(spec: Any, data: Mapping[str, Any], pm: HfsdkPluginManager) -> Any:
    """``spec`` as configured by the user's ``algorithm`` section (itself when that section
    does not resolve: resolve_run_config reports it)."""
    if spec.configure is None:
        return spec
    try:
        algorithm = structure(
            make_converter(), dict(_section(dict(data), "algorithm")), spec.config_cls
        )
        return spec.for_run(algorithm)
    except ConfigError:
        return spec


def _default_task_preset(pm: HfsdkPluginManager) -> Mapping[str, Any]:
    """The registry's default task's own preset (empty when no task plugin is installed:
    the run then says which distribution to install when it looks for the task's assets)."""
    from hfsdk.core.tasks import DEFAULT_TASK

    entry = pm.registry("tasks").get(DEFAULT_TASK)
    return entry.impl.preset if entry is not None else {}
