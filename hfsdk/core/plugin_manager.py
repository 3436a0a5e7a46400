"""The plugin manager: loads ``hfsdk`` entry points once and fills the registries.

Built by a factory (:func:`get_plugin_manager`), never at import time.
Environment variables:

- ``HFSDK_LOAD_PLUGINS=a,b``: load only these entry points (the core's
  built-ins always load).
- ``HFSDK_DISABLE_PLUGINS=a,b``: block these entry points.
- ``HFSDK_TRACE_PLUGINS=1``: print hook calls to stderr (docs/plugin_hooks.md: which)."""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import logging
import os
import sys
import traceback
from collections.abc import Iterable, Iterator, Mapping
from importlib import metadata
from types import MappingProxyType
from typing import Any, Literal

import attrs
import pluggy

from hfsdk.core.errors import DuplicateNameError, HfsdkError
from hfsdk.core.registry import KIND_ALIASES, REGISTRY_HOOKS, Registry, normalize_kind
from hfsdk.core.workers.errors import WorkerError

ENTRY_POINT_GROUP = "hfsdk"
BUILTIN_PLUGIN_NAME = "hfsdk"
SHIPPED = ("hfsdk-plugin-", "hfsdk-backend-common")  # hfsdk's own distributions' names
logger = logging.getLogger(__name__)

PluginStatus = Literal["loaded", "failed", "disabled"]


@attrs.define(kw_only=True)
class PluginInfo:
    """What ``hfsdk plugins`` reports for one plugin."""

    name: str
    distribution: str | None
    version: str | None
    status: PluginStatus
    hooks: list[str] = attrs.field(factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return attrs.asdict(self)


def _env_list(var: str) -> set[str] | None:
    names = {p.strip() for p in os.environ.get(var, "").split(",") if p.strip()}
    return names or None


def _trace_enabled() -> bool:
    return os.environ.get("HFSDK_TRACE_PLUGINS", "").strip().lower() not in ("", "0", "false", "no")


class HfsdkPluginManager:
    """Owns the pluggy manager, the plugin report and the registries.

    Registries are filled lazily, the first time one is asked for, so listing
    plugins never imports the implementations (and never torch or ray)."""

    def __init__(self, pm: pluggy.PluginManager, plugins: list[PluginInfo]) -> None:
        self.pm = pm
        self.plugins = plugins
        self._registries: dict[str, Registry] = {}
        self._kinds: dict[str, str] | None = None
        self._filling: dict[str, set[str]] = {}  # kind -> the plugins registering into it now

    @property
    def hook(self) -> Any:
        """pluggy's hook relay (for non-registry hooks such as ``hfsdk_validate_config``)."""
        return self.pm.hook

    def plugin_info(self, name: str) -> PluginInfo | None:
        """The report for plugin ``name``, if it was found."""
        return next((p for p in self.plugins if p.name == name), None)

    def failed_plugins(self) -> list[PluginInfo]:
        """The plugins that failed to load or to register (``hfsdk plugins`` shows why)."""
        return [p for p in self.plugins if p.status == "failed"]

    def failed_plugins_note(self) -> str:
        """``"; plugin(s) that failed to load: NAME (why), ..."`` and those HFSDK_DISABLE_PLUGINS
        blocks, or ``""``; appended to every failed lookup of a name: it may be one of theirs."""
        shown = ", ".join(map(_described, self.failed_plugins()))
        why = "fix or reinstall them; hfsdk plugins --check lists them"  # (plain: not all)
        note = f"; plugin(s) that failed to load: {shown} ({why})" if shown else ""
        blocked = _env_list("HFSDK_DISABLE_PLUGINS") or set()
        if off := [p.name for p in self.plugins if p.status == "disabled" and p.name in blocked]:
            note += f"; plugin(s) disabled by HFSDK_DISABLE_PLUGINS: {', '.join(off)} (remove them "
            note += "from it, or unset it, to load them)"
        return note

    def registry_kinds(self) -> Mapping[str, str]:
        """Every registry kind -> the hook that fills it: the core's, then those plugins
        add through ``hfsdk_register_registry_kinds`` (collected once)."""
        if self._kinds is None:
            kinds = dict(REGISTRY_HOOKS)
            owners: dict[str, str] = {}
            # The first registered first: a later plugin taking its kind is the one dropped.
            for impl in self.pm.hook.hfsdk_register_registry_kinds.get_hookimpls():
                register = functools.partial(self._add_kind, kinds, owners, impl.plugin_name)
                try:
                    impl.function(register=register)
                except Exception as exc:  # a clash, an undefined hook, a bug: drop it and its kinds
                    kinds = {k: h for k, h in kinds.items() if owners.get(k) != impl.plugin_name}
                    self.mark_failed(impl.plugin_name, "hfsdk_register_registry_kinds", exc)
            self._kinds = kinds
        return MappingProxyType(self._kinds)

    def _add_kind(
        self, kinds: dict[str, str], owners: dict[str, str], plugin: str, kind: str, hook_name: str
    ) -> None:
        kind = kind.replace("-", "_")
        if kind in kinds or kind in KIND_ALIASES:
            owner = f"plugin {owners[kind]!r}" if kind in owners else "the core"
            why = f"adds registry kind {kind!r}, which {owner} already has"
            raise HfsdkError(f"plugin {plugin!r} {why}; choose another name")
        caller = getattr(self.pm.hook, hook_name, None)
        if caller is None or caller.spec is None:
            raise HfsdkError(
                f"plugin {plugin!r} adds registry kind {kind!r} filled by {hook_name!r}, which "
                "no hook specification defines; add it with hfsdk_addhooks first"
            )
        kinds[kind], owners[kind] = hook_name, plugin

    def registry(self, kind: str) -> Registry:
        """The registry of ``kind``, filled from every loaded plugin on first use."""
        kind = normalize_kind(kind, self.registry_kinds())
        if self._filling.get(kind):  # a plugin's registration reads the others' entries
            return self._fill(kind, skip=set(self._filling[kind]))
        if kind not in self._registries:
            self._registries[kind] = self._fill(kind)
        return self._registries[kind]

    def _fill(self, kind: str, skip: set[str] | None = None) -> Registry:
        """Call the kind's hook through pluggy (``subset_hook_caller``: wrappers, ``tryfirst``,
        tracing all apply), in its order, once per plugin: ``register`` knows whose names it
        receives, and one broken plugin (or wrapper) is dropped without stopping the others."""
        registry = Registry(kind)
        registry.explain_missing = self.failed_plugins_note
        hook_name = self.registry_kinds()[kind]
        impls = getattr(self.pm.hook, hook_name).get_hookimpls()
        wrappers = {i.plugin_name for i in impls if i.hookwrapper or i.wrapper}
        # get_hookimpls() lists the order pluggy calls in, reversed.
        skipped = wrappers | (skip or set())  # (a failed plugin has no hooks left: unregistered)
        queue = [i.plugin_name for i in reversed(impls) if i.plugin_name not in skipped]
        active = self._filling.setdefault(kind, set())
        while queue:
            plugin = queue.pop(0)
            others = [i.plugin for i in impls if i.plugin_name not in wrappers | {plugin}]
            call = self.pm.subset_hook_caller(hook_name, remove_plugins=others)
            if _trace_enabled():
                print(f"hfsdk: {hook_name} -> plugin {plugin!r}", file=sys.stderr)
            active.add(plugin)
            try:
                call(register=functools.partial(_register_into, registry, plugin))
            except DuplicateNameError:
                raise  # no winner: both plugins are named
            except Exception as exc:  # (an HfsdkError: what it registered broke a contract)
                of = {getattr(i.function, "__code__", None): i.plugin_name for i in impls}
                inner = [of[f.frame.f_code] for f in inspect.trace(0) if f.frame.f_code in of][-1:]
                culprit = inner[0] if inner and inner[0] in wrappers else plugin  # a wrapper's bug?
                registry._remove_plugin(culprit)
                self.mark_failed(culprit, hook_name, exc)
                if culprit != plugin:  # the plugin's call was cut short: again, without it
                    registry._remove_plugin(plugin)
                    queue.insert(0, plugin)
            finally:
                active.discard(plugin)
        for plugin in {e.plugin for e in registry.values() if not self.pm.has_plugin(e.plugin)}:
            registry._remove_plugin(plugin)  # (it failed in a registry filled meanwhile)
        return registry

    def mark_failed(self, plugin: str, hook_name: str, exc: BaseException) -> None:
        """Drop ``plugin`` from every registry and hook, saying and recording why."""
        message = f"{hook_name} raised {type(exc).__name__}: {exc}"
        info = self.plugin_info(plugin)
        if info is not None:
            info.status, info.error = "failed", message
        for registry in self._registries.values():
            registry._remove_plugin(plugin)
        if self.pm.get_plugin(plugin) is not None:  # its other hooks are not called either
            self.pm.unregister(name=plugin)
        print(f"hfsdk: plugin {plugin!r} failed in {message}", file=sys.stderr)


def _described(p: PluginInfo) -> str:  # on one line: the CLI shows only the first
    return f"{p.name} [{p.distribution or 'in-process'}] ({' '.join(str(p.error).split())})"


def _register_into(
    registry: Registry,
    plugin: str,
    name: str,
    impl: Any = None,
    *,
    config_cls: type | None = None,
    **extra: Any,
) -> None:
    if impl is None:  # (else a TypeError naming this function, not the hook's register)
        usage = "expected register(name, impl, *, config_cls=None, ...) (docs/plugin_hooks.md)"
        raise HfsdkError(f"plugin {plugin!r} called register({name!r}); {usage}")
    if registry.kind == "algorithms":
        config_cls, extra = _algorithm_entry(plugin, name, impl, config_cls, extra)
    if registry.kind == "tasks":
        from hfsdk.core.task_spec import task_entry

        extra = task_entry(plugin, name, impl, extra)
    if registry.kind in ("training_backends", "rollout_backends"):  # (else a run blames a key)
        from hfsdk.core.role_config import RoleConfig, RolloutConfig

        base = RoleConfig if registry.kind == "training_backends" else RolloutConfig
        if not (isinstance(config_cls, type) and issubclass(config_cls, base)):
            what = f"backend {name!r} with config {config_cls!r}"
            raise HfsdkError(f"plugin {plugin!r} registered {what}; expected a {base.__name__}")
    registry._add(name, impl, plugin=plugin, config_cls=config_cls, **extra)


def _algorithm_entry(
    plugin: str, name: str, spec: Any, config_cls: type | None, extra: dict[str, Any]
) -> tuple[type, dict[str, Any]]:
    """An algorithm is registered as its spec: the config class and doc come from it."""
    from hfsdk.core.algorithm_spec import AlgorithmSpec

    if not isinstance(spec, AlgorithmSpec):
        raise HfsdkError(
            f"plugin {plugin!r} registered algorithm {name!r} as {type(spec).__name__}; "
            "expected an hfsdk.AlgorithmSpec (register(spec.name, spec))"
        )
    if spec.name != name or (config_cls is not None and config_cls is not spec.config_cls):
        raise HfsdkError(
            f"plugin {plugin!r} registered algorithm {name!r} with a spec named {spec.name!r} "
            "(or another config class); register(spec.name, spec) states both once"
        )
    doc = spec.summary or inspect.getdoc(spec.program) or ""
    return spec.config_cls, {"doc": doc, **extra}


def _hook_names(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    return sorted(c.name for c in pm.get_hookcallers(plugin) or [])


def _entry_points() -> list[metadata.EntryPoint]:
    # A distribution found twice on sys.path: its first copy. By name, hfsdk's own plugin
    # first: a third party's of the same name is the one refused.
    unique: dict[tuple[str, bool, str], metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = str(getattr(ep.dist, "name", ""))
        unique.setdefault((ep.name, not dist.startswith(SHIPPED), dist), ep)
    return [unique[key] for key in sorted(unique)]


def build_plugin_manager(
    extra_plugins: Iterable[tuple[str, object]] = (), *, load_entry_points: bool = True
) -> HfsdkPluginManager:
    """A new plugin manager; ``extra_plugins`` are ``(name, module_or_object)`` pairs registered
    after the entry points (tests and embedding applications use this)."""
    import hfsdk
    from hfsdk import hookspecs
    from hfsdk.core import builtin_plugin

    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    pm.add_hookcall_monitoring(lambda *_: None, functools.partial(_name_the_plugin, pm))
    if _trace_enabled():
        pm.trace.root.setwriter(lambda msg: print(f"hfsdk trace: {msg}", end="", file=sys.stderr))
        pm.enable_tracing()
    pm.hook.hfsdk_addhooks.call_historic(kwargs={"pluginmanager": pm})

    pm.register(builtin_plugin, name=BUILTIN_PLUGIN_NAME)
    hooks = _hook_names(pm, builtin_plugin)
    own = {"distribution": "hfsdk", "version": hfsdk.__version__, "status": "loaded"}
    plugins = [PluginInfo(name=BUILTIN_PLUGIN_NAME, hooks=hooks, **own)]  # type: ignore[arg-type]

    if load_entry_points:
        only = _env_list("HFSDK_LOAD_PLUGINS")
        disabled = _env_list("HFSDK_DISABLE_PLUGINS") or set()
        for ep in _entry_points():
            dist, version = (ep.dist.name, ep.dist.version) if ep.dist is not None else (None, None)
            info = PluginInfo(name=ep.name, distribution=dist, version=version, status="loaded")
            plugins.append(info)
            if ep.name in disabled or (only is not None and ep.name not in only):
                info.status = "disabled"
                pm.set_blocked(ep.name)
                continue
            taken = next((p for p in plugins if p.name == ep.name and p is not info), None)
            if taken is not None:  # never a silent stand-in for another distribution's plugin
                why = f"distribution {taken.distribution!r} has a plugin named {ep.name!r} too"
                info.status, info.error = "failed", f"{why}; rename the entry point of {dist!r}"
                continue
            try:
                module = ep.load()
                pm.register(module, name=ep.name)
            except (Exception, SystemExit) as exc:  # (sys.exit at import must not end hfsdk)
                info.status, info.error = "failed", f"{type(exc).__name__}: {exc}"
                if _trace_enabled():
                    traceback.print_exc()
                continue
            info.hooks = _hook_names(pm, module)
        for var, names in (("HFSDK_LOAD_PLUGINS", only), ("HFSDK_DISABLE_PLUGINS", disabled)):
            if unknown := sorted((names or set()) - {p.name for p in plugins}):  # a typo
                print(f"hfsdk: {var} names {unknown}, no installed plugin", file=sys.stderr)

    for name, plugin in extra_plugins:
        info = PluginInfo(name=name, distribution=None, version=None, status="loaded")
        plugins.append(info)
        try:
            pm.register(plugin, name=name)
        except Exception as exc:
            info.status, info.error = "failed", f"{type(exc).__name__}: {exc}"
            continue
        info.hooks = _hook_names(pm, plugin)

    _check_unknown_hooks(pm, plugins)
    for info in [p for p in plugins if p.status == "failed"]:  # (else silent till a lookup misses)
        why = "none of its hooks run (config checks, observers, preflight checks); fix or reinstall"
        logger.warning("plugin failed to load: %s; %s it (hfsdk plugins --check)", _described(info),
                       why)  # fmt: skip
    return HfsdkPluginManager(pm, plugins)


def _check_unknown_hooks(pm: pluggy.PluginManager, plugins: list[PluginInfo]) -> None:
    """Mark plugins that implement a hook no spec defines (a typo, or no ``hfsdk_`` prefix)."""
    for name, caller in vars(pm.hook).items():
        impls = [] if caller.spec is not None else caller.get_hookimpls()
        for impl in [i for i in impls if not i.optionalhook]:  # (optional: an absent plugin's)
            info = next((p for p in plugins if p.name == impl.plugin_name), None)
            if info is not None and info.status == "loaded":
                why = "a typo, or a hook of a plugin not loaded here: mark it optionalhook=True"
                why = why if name.startswith("hfsdk_") else "hook names start with hfsdk_"
                info.status, info.error = "failed", f"implements unknown hook {name!r}; {why} " \
                    "(see docs/plugin_hooks.md for them)"  # fmt: skip
                pm.unregister(name=impl.plugin_name)


@functools.cache
def get_plugin_manager() -> HfsdkPluginManager:
    """The process-wide plugin manager (built on first call, then reused)."""
    return build_plugin_manager()


def get_registry(kind: str) -> Registry:
    """The registry of ``kind`` (e.g. ``"advantage_estimators"``) from the default plugin manager.

    ``kind`` may use ``-`` or ``_``. Unknown kinds raise an error listing the known ones."""
    return get_plugin_manager().registry(kind)


def reset_plugin_manager() -> None:
    """Forget the process-wide plugin manager (tests; after installing a plugin)."""
    get_plugin_manager.cache_clear()


@contextlib.contextmanager
def plugin_code(plugin: str, what: str, fix: str = "", error: type = HfsdkError) -> Iterator[None]:
    """Run plugin ``plugin``'s ``what``: a bug becomes ``error`` naming it and ``fix``; a refusal
    (HfsdkError), a dead worker, a full disk or a signal (in Ray, a SystemError) goes on."""
    try:
        yield
    except Exception as e:
        full = isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)  # the CLI's line
        if full or isinstance(e, (HfsdkError, WorkerError, SystemError)):
            raise
        fix = fix or f"fix or disable it (HFSDK_DISABLE_PLUGINS={plugin})"
        why = " ".join(str(e).split())  # one line: the CLI shows only the first one
        raise error(f"plugin {plugin!r}'s {what} raised {type(e).__name__}: {why}; {fix}") from e


def _name_the_plugin(pm: pluggy.PluginManager, outcome: Any, hook: str, impls: Any, _: Any) -> None:
    """A bug in a firstresult hook's implementation becomes one error naming its plugin."""
    of = {getattr(i.function, "__code__", None): i.plugin_name for i in impls}
    exc, spec = outcome.exception, getattr(pm.hook, hook).spec
    who = [of[f.f_code] for f, _ in traceback.walk_tb(exc and exc.__traceback__) if f.f_code in of]
    if isinstance(exc, Exception) and who and spec and spec.opts["firstresult"]:
        try:  # (call_each names those of the other hooks)
            with plugin_code(who[-1], hook):
                raise exc
        except Exception as named:
            outcome.force_exception(named)


def call_each(hook: Any, error: type = HfsdkError, **kwargs: Any) -> Iterator[Any]:
    """Each implementation's answer to ``hook``, one at a time in pluggy's order, so a bug is
    named with its plugin (:func:`plugin_code`); not traced by ``HFSDK_TRACE_PLUGINS``."""
    for impl in reversed(hook.get_hookimpls()):
        with plugin_code(impl.plugin_name, hook.name, error=error):
            answer = impl.function(**{name: kwargs[name] for name in impl.argnames})
        yield answer
