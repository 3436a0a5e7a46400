"""Help text of config fields: stored in attrs metadata, read by ``--explain`` and the docs.

Every field of a config class carries ``metadata={"help": "..."}``: what it
means, its unit, and a paper or reference where it has one. :func:`help_field`
is ``attrs.field`` with that metadata; :func:`field_help` reads it back with
each field's type and default, for ``hfsdk config show --explain`` and for
``scripts/gen_config_docs.py`` (so the docs come from the same source).
"""

from __future__ import annotations

from typing import Any

import attrs

HELP_KEY = "help"


def help_field(help: str, **kwargs: Any) -> Any:
    """``attrs.field(**kwargs)`` whose metadata holds ``help``."""
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata[HELP_KEY] = help
    return attrs.field(metadata=metadata, **kwargs)


@attrs.frozen(kw_only=True)
class FieldHelp:
    """One documented field: dotted name, type, default and help text."""

    name: str
    type: str
    default: str
    help: str


def _type_name(tp: Any) -> str:
    if isinstance(tp, str):
        return tp
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


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


def field_help(cls: type, prefix: str = "") -> list[FieldHelp]:
    """Every field of attrs class ``cls`` (recursing into nested config classes)."""
    out: list[FieldHelp] = []
    for field in attrs.fields(cls):
        name = f"{prefix}{field.name}"
        out.append(
            FieldHelp(
                name=name,
                type=_type_name(field.type),
                default=_default(field),
                help=str(field.metadata.get(HELP_KEY, "")),
            )
        )
        nested = field.default.factory if isinstance(field.default, attrs.Factory) else None  # type: ignore[arg-type]
        nested = nested if isinstance(nested, type) and attrs.has(nested) else None
        if nested is None and attrs.has(type(field.default)):
            nested = type(field.default)
        if nested is not None:
            out.extend(field_help(nested, prefix=f"{name}."))
    return out


def missing_help(cls: type) -> list[str]:
    """Dotted names of the fields of ``cls`` that carry no help text."""
    return [f.name for f in field_help(cls) if not f.help.strip()]
