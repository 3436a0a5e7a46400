"""Choosing a backend: the default one for a role kind, and its worker class.

A training backend's registration may declare ``default_for=(kinds...)``
(role kinds, see :data:`~hfsdk.core.algorithm_spec.ROLE_KINDS`); a rollout
backend's may declare ``default=True``. The core names no backend: a section
that names none gets the one an installed plugin declared default.

A training backend registers either a :class:`~hfsdk.core.workers.Worker`
subclass that serves every role kind, or an object with
``worker_class(kind) -> type[Worker]`` that picks one per kind.
"""

from __future__ import annotations

from typing import Any

from hfsdk.core.errors import ConfigError, HfsdkError
from hfsdk.core.registry import Registry


def default_training_backend(registry: Registry, kind: str) -> str:
    """The training backend declared default for role ``kind``; a one-line error otherwise."""
    names = [n for n, e in registry.items() if kind in tuple(e.extra.get("default_for", ()))]
    return _one_default(registry, names, f"role kind {kind!r}", "<role>.backend")


def default_rollout_backend(registry: Registry) -> str:
    """The rollout backend declared ``default=True``; a one-line error otherwise."""
    names = [n for n, e in registry.items() if e.extra.get("default")]
    return _one_default(registry, names, "rollout", "rollout.backend")


def _one_default(registry: Registry, names: list[str], what: str, key: str) -> str:
    if len(names) == 1:
        return names[0]
    installed = ", ".join(registry) or "none"
    if not names:
        raise ConfigError(
            f"no installed {registry.what} declares itself the default for {what} "
            f"(installed: {installed}); set {key} to one of them or install a backend plugin"
        )
    owners = ", ".join(f"{n!r} (plugin {registry[n].plugin!r})" for n in names)
    raise ConfigError(
        f"several {registry.what}s declare themselves the default for {what}: {owners}; "
        f"set {key} to choose one"
    )


def worker_class(entry: Any, role: str, kind: str) -> type:
    """The worker class the training backend ``entry`` runs role ``role`` (of ``kind``) with."""
    from hfsdk.core.workers import Worker

    impl = entry.impl
    cls = impl
    picker = getattr(impl, "worker_class", None)
    if callable(picker) and not (isinstance(impl, type) and issubclass(impl, Worker)):
        cls = picker(kind)
    if not (isinstance(cls, type) and issubclass(cls, Worker)):
        raise HfsdkError(
            f"{role} selects training backend {entry.name!r} (plugin {entry.plugin!r}), which "
            f"registers no worker class for role kind {kind!r} and cannot train it yet; "
            f"choose another backend for {role} (hfsdk list training-backends)"
        )
    return cls
