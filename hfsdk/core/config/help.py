"""Help text of config fields: stored in attrs metadata, read by ``--explain`` and the docs.

Every field of a config class carries ``metadata={"help": "..."}``: what it
means, its unit, and a paper or reference where it has one. :func:`help_field`
is ``attrs.field`` with that metadata; :func:`field_help` reads it back with
each field's type and default, for ``hfsdk config show --explain`` and for
``scripts/gen_config_docs.py`` (its module ``scripts/config_reference.py``: so the docs
come from the same source).
"""

from __future__ import annotations

from typing import Any

import attrs

RESUMABLE_KEY = "hfsdk_resumable"
"""Field metadata: a resumed run may change the setting (:func:`help_field`)."""
HELP_KEY = "help"
SUBSECTIONS_KEY = "hfsdk_subsections"
"""attrs metadata marking a field that holds plugin-contributed sub-sections
(:mod:`hfsdk.core.config.rollout_sections`)."""


def help_field(help: str, *, resumable: bool = False, **kwargs: Any) -> Any:
    """``attrs.field(**kwargs)`` whose metadata holds ``help``.

    ``resumable``: a run resumed from a checkpoint may change this setting (the run
    length, loggers, timeouts: what the checkpoint's state does not depend on).
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata[HELP_KEY] = help
    if resumable:
        metadata[RESUMABLE_KEY] = True
    return attrs.field(metadata=metadata, **kwargs)


@attrs.frozen(kw_only=True)
class FieldHelp:
    """One documented field: dotted name, type, default and help text."""

    name: str
    type: str
    default: str
    help: str


def _type_name(cls: type, field: attrs.Attribute) -> str:
    """The annotation as written (``field.type`` may have been resolved to objects)."""
    for klass in cls.__mro__:
        written = vars(klass).get("__annotations__", {}).get(field.name)
        if isinstance(written, str):
            return written
    tp = field.type
    return str(tp).replace("typing.", "") if not isinstance(tp, type) else tp.__name__


def _default(field: attrs.Attribute) -> str:
    default = field.default
    if default is attrs.NOTHING:
        return "(required)"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:
            return "(computed)"
        default = default.factory()
    if attrs.has(type(default)):
        return "(section)"
    return repr(default)


def _help_of(cls: type, field: attrs.Attribute) -> str:
    """The field's help, or that of the nearest base class declaring the same field.

    A subclass that only changes a default (``kl_coef: float = 0.05``) keeps the
    meaning its base documented.
    """
    if text := field.metadata.get(HELP_KEY):
        return str(text)
    for base in cls.__mro__[1:]:
        if attrs.has(base):
            inherited = attrs.fields_dict(base).get(field.name)
            if inherited is not None and inherited.metadata.get(HELP_KEY):
                return str(inherited.metadata[HELP_KEY])
    return ""


def field_help(cls: type, prefix: str = "") -> list[FieldHelp]:
    """Every field of attrs class ``cls`` (recursing into nested config classes)."""
    out: list[FieldHelp] = []
    for field in attrs.fields(cls):
        if field.metadata.get(SUBSECTIONS_KEY):
            continue  # each contributed sub-section is documented with its own class
        name = f"{prefix}{field.name}"
        kind, default, text = _type_name(cls, field), _default(field), _help_of(cls, field)
        out.append(FieldHelp(name=name, type=kind, default=default, help=text))
        factory = getattr(field.default, "factory", None)
        nested = factory if isinstance(factory, type) and attrs.has(factory) else None
        if nested is None and attrs.has(type(field.default)):
            nested = type(field.default)
        if nested is not None:
            out.extend(field_help(nested, prefix=f"{name}."))
    return out


def explain(section: str, value: Any, sources: dict[str, str] | None = None) -> list[str]:
    """Lines ``section.key: value`` then the field's help, for every field of a section value.

    With ``sources`` (dotted key -> where its value came from, see
    :mod:`hfsdk.core.config.sources`) each line also names its source; a key
    ``sources`` lacks has its default.
    """
    lines: list[str] = []
    for field in attrs.fields(type(value)):
        current = getattr(value, field.name)
        key = f"{section}.{field.name}"
        if field.metadata.get(SUBSECTIONS_KEY):
            for name, sub in current.items():
                lines.append(f"{section}.{name}:  ({type(sub).__doc__ or 'section'})".strip())
                lines.extend(explain(f"{section}.{name}", sub, sources))
            continue
        if attrs.has(type(current)):
            lines.append(f"{key}:  ({_help_of(type(value), field) or 'section'})")
            lines.extend(explain(key, current, sources))
            continue
        where = f"from: {_source_of(sources, key)}; " if sources is not None else ""
        lines.append(f"{key}: {current!r}   ({where}default: {_default(field)})")
        text = _help_of(type(value), field)
        lines.append(f"    {text}" if text else "    (no help text)")
    return lines


def _source_of(sources: dict[str, str], key: str) -> str:
    """A key's source; a key under a mapping-valued one (``placement.pools.global.devices``
    under ``placement.pools``) takes that one's."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:end]))
        if found is not None:
            return found
    inner = {v for k, v in sources.items() if k.startswith(f"{key}.")}
    return "; ".join(sorted(inner)) if inner else "default"  # inner: some entries of a mapping
