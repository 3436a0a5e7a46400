"""Typed registries: name -> implementation, config class, owning plugin, doc.

Registries are filled once by the plugin manager through the
``hfsdk_register_*`` hooks; everything else looks names up here, never
through ``pm.hook`` on a hot path.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from hfsdk.core.errors import DuplicateNameError, HfsdkError, UnknownNameError

REGISTRY_HOOKS: Mapping[str, str] = MappingProxyType(
    {
        "algorithms": "hfsdk_register_algorithms",
        "advantage_estimators": "hfsdk_register_advantage_estimators",
        "policy_losses": "hfsdk_register_policy_losses",
        "value_losses": "hfsdk_register_value_losses",
        "kl_estimators": "hfsdk_register_kl_estimators",
        "reward_functions": "hfsdk_register_reward_functions",
        "rollout_backends": "hfsdk_register_rollout_backends",
        "training_backends": "hfsdk_register_training_backends",
        "transfer_protocols": "hfsdk_register_transfer_protocols",
        "tasks": "hfsdk_register_tasks",
        "config_sections": "hfsdk_register_config_sections",
        "step_observers": "hfsdk_register_step_observers",
        "preflight_checks": "hfsdk_register_preflight_checks",
        "rollout_sections": "hfsdk_register_rollout_sections",
        "model_inputs": "hfsdk_register_model_inputs",
        "trackers": "hfsdk_register_trackers",
    }
)
"""Registry kind -> the hook that fills it."""
NOT_CALLED = {"algorithms", "tasks", "transfer_protocols", "model_inputs"}  # specs and objects

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0].strip() if (doc or "").strip() else ""


@attrs.frozen(kw_only=True)
class RegistryEntry:
    """One registered name: what implements it, how it is configured, who owns it."""

    name: str
    impl: Any
    config_cls: type | None
    plugin: str
    doc: str
    extra: Mapping[str, Any] = attrs.field(
        factory=dict, converter=lambda d: MappingProxyType(dict(d))
    )

    @property
    def summary(self) -> str:
        """The first line of the docstring (shown by ``hfsdk list``)."""
        return _first_line(self.doc)

    def make_config(self, **values: Any) -> Any:
        """An instance of the entry's config class (``None`` if it has none)."""
        return None if self.config_cls is None else self.config_cls(**values)


def closest_match(name: str, candidates: list[str]) -> str | None:
    """The candidate most similar to ``name``, if any is reasonably close."""
    matches = difflib.get_close_matches(name, candidates, n=1, cutoff=0.5)
    return matches[0] if matches else None


def unknown_name_message(what: str, name: str, available: list[str]) -> str:
    """One line: the unknown name, the available ones, and the closest match."""
    names = ", ".join(sorted(available)) or "(none installed)"
    hint = closest_match(name, available)
    suggestion = f"; did you mean {hint!r}?" if hint else ""
    return f"unknown {what} {name!r}; available: {names}{suggestion}"


class Registry(Mapping[str, RegistryEntry]):
    """A read-only mapping of names to :class:`RegistryEntry` for one kind.

    Only the plugin manager adds entries (through :meth:`_add`); a second entry
    with the same name is a :class:`DuplicateNameError` naming both plugins.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, RegistryEntry] = {}
        self.explain_missing: Callable[[], str] | None = None
        """Appended to an unknown-name error: the plugins that failed to load (set by the
        plugin manager; a name from a broken plugin must not look merely misspelt)."""

    @property
    def what(self) -> str:
        """The singular, human name of this kind (``advantage estimator``)."""
        singular = {"policy_losses": "policy_loss", "value_losses": "value_loss"}.get(
            self.kind, self.kind.rstrip("s")
        )
        return singular.replace("_", " ")

    def _add(
        self,
        name: str,
        impl: Any,
        *,
        plugin: str,
        config_cls: type | None = None,
        doc: str | None = None,
        **extra: Any,
    ) -> RegistryEntry:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise HfsdkError(
                f"plugin {plugin!r} registered {self.what} name {name!r}; expected a name of "
                "letters, digits, '_', '-' or '.', starting with a letter"
            )
        if self.kind in set(REGISTRY_HOOKS) - NOT_CALLED and not callable(impl):  # (mid-run else)
            raise HfsdkError(
                f"plugin {plugin!r} registered {self.what} {name!r} as {impl!r}, which cannot "
                "be called; register the function (or class) itself"
            )
        cls = impl if self.kind in ("config_sections", "rollout_sections") else config_cls
        # A core kind's class is built with no input (a reward's keys are set per entry).
        per_entry = self.kind == "reward_functions" or self.kind not in REGISTRY_HOOKS
        fields = attrs.fields(cls) if attrs.has(cls) and not per_entry else ()
        bare = [f.name for f in fields if f.init and f.default is attrs.NOTHING]
        if bare or (config_cls is not None and not attrs.has(config_cls)):  # (else a run fails)
            raise HfsdkError(
                f"plugin {plugin!r} registered {self.what} {name!r} with config class "
                f"{cls if bare else config_cls!r}; expected an attrs class (use @attrs.frozen("
                f"kw_only=True)) with a default on every field{f' (not on {bare})' * bool(bare)}"
            )
        if (existing := self._entries.get(name)) is not None:
            raise DuplicateNameError(
                f"{self.what} {name!r} is registered by both plugin {existing.plugin!r} and plugin "
                f"{plugin!r}; uninstall one of them or block one with HFSDK_DISABLE_PLUGINS"
            )
        doc = doc if doc is not None else (inspect.getdoc(impl) or "")
        entry = RegistryEntry(
            name=name, impl=impl, config_cls=config_cls, plugin=plugin, doc=doc, extra=extra
        )
        self._entries[name] = entry
        return entry

    def _remove_plugin(self, plugin: str) -> None:
        self._entries = {k: v for k, v in self._entries.items() if v.plugin != plugin}

    def __getitem__(self, name: str) -> RegistryEntry:
        try:
            return self._entries[name]
        except KeyError:
            message = unknown_name_message(self.what, name, list(self._entries))
            if self.explain_missing is not None:
                message += self.explain_missing()
            raise UnknownNameError(message) from None

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The entry of ``name``, or ``default`` when there is none (``Mapping.get``).

        Use ``registry[name]`` for an error that lists the available names.
        """
        return self._entries.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._entries)})"


KIND_ALIASES = {"rewards": "reward_functions"}
"""Short names users type for a registry kind (``hfsdk list rewards``)."""


def normalize_kind(kind: str, kinds: Mapping[str, str] = REGISTRY_HOOKS) -> str:
    """``advantage-estimators`` -> ``advantage_estimators``; a kind not in ``kinds``
    (kind -> hook; the core's by default) is an error listing them."""
    normalized = kind.replace("-", "_")
    normalized = KIND_ALIASES.get(normalized, normalized)
    if normalized not in kinds:
        available = [k.replace("_", "-") for k in kinds]
        raise UnknownNameError(unknown_name_message("registry kind", kind, available))
    return normalized
