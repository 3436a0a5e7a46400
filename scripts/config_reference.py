"""The config reference (``docs/config_reference.md``), generated from the attrs metadata.

The same help texts ``hfsdk config show --explain`` prints; a test checks the
committed file matches (regenerate with ``python scripts/gen_config_docs.py``). A
developer tool beside its script, not part of the installed package.
"""

from __future__ import annotations

from hfsdk import field_help

_KINDS = {
    "algorithms": "Algorithms (`algorithm:` section)",
    "advantage_estimators": "Advantage estimators (`advantage:` section)",
    "policy_losses": "Policy losses (`policy_loss:` section)",
    "value_losses": "Value losses (`value_loss:` section)",
    "rollout_corrections": "Rollout corrections (`rollout_correction.apply` entries)",
    "training_backends": "Training backends (role sections: `actor:`, `critic:`, ...)",
    "rollout_backends": "Rollout backends (`rollout:` section)",
    "reward_functions": "Reward functions (`reward.functions[].kwargs`)",
}


def _table(cls: type) -> list[str]:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for item in field_help(cls):
        text = item.help.replace("|", "\\|") or "(no help text)"
        kind = item.type.replace("|", "\\|")
        default = item.default.replace("|", "\\|")
        rows.append(f"| `{item.name}` | `{kind}` | `{default}` | {text} |")
    return rows


def config_reference_markdown() -> str:
    """The whole reference: core sections, then the config class of every entry registered
    by the core or an ``hfsdk-plugin-*`` distribution of this repository."""
    from hfsdk import SignalConfig, get_plugin_manager, get_registry
    from hfsdk.core.config.run_config import section_classes

    pm = get_plugin_manager()

    def documented(plugin: str) -> bool:
        """The core's and the ``hfsdk-plugin-*`` distributions' entries (not examples)."""
        info = pm.plugin_info(plugin)
        dist = (info.distribution or "") if info is not None else ""
        return dist == "hfsdk" or dist.startswith("hfsdk-plugin-")

    out = [
        "# Config reference",
        "",
        "Generated from the help text in each config class's attrs metadata by",
        "`python scripts/gen_config_docs.py` (do not edit by hand; a test checks it is",
        "current). `hfsdk config show --algo NAME --explain` prints the same text next",
        "to a resolved config's values.",
        "",
        "## Core sections",
    ]
    core = {**section_classes(), "reward / cost (scorer roles)": SignalConfig}
    for name, cls in core.items():
        out += ["", f"### `{name}`", "", *_table(cls)]
    for kind, title in _KINDS.items():
        registry = get_registry(kind)
        entries = [
            (n, e) for n, e in registry.items() if e.config_cls is not None and documented(e.plugin)
        ]
        if not entries:
            continue
        out += ["", f"## {title}"]
        for name, entry in entries:
            if not field_help(entry.config_cls):
                continue
            out += ["", f"### `{name}` (plugin `{entry.plugin}`)", "", *_table(entry.config_cls)]
    sections = [(n, e) for n, e in get_registry("rollout_sections").items() if documented(e.plugin)]
    if sections:
        out += ["", "## Rollout sub-sections (`rollout.<name>:`, contributed by plugins)"]
        for name, entry in sections:
            out += ["", f"### `rollout.{name}` (plugin `{entry.plugin}`)", "", *_table(entry.impl)]
    return "\n".join(out) + "\n"
