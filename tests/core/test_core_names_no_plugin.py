"""The core knows no plugin: ``hfsdk/core`` never mentions a plugin of this repository by name.

Names checked: every entry-point name and import package of the distributions
under ``plugins/`` and ``examples/``, and the algorithms and backends those
plugins register (``grpo``, ``fsdp``, ``hf``, ...). Upper-case prose (``PPO``,
``HF format``) and longer identifiers (``ppo_clip``, ``export_hf``) are not
names of plugins and do not count.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import hfsdk

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "hfsdk" / "core"
EXEMPT: set[Path] = set()
"""Core paths allowed to name plugins: none (``config import``, which translates another
project's config into this repository's algorithms by name, is the migration plugin's)."""

# Words that name a plugin here and, in the core, something else: verl's dataset column
# `reward_model` (`reward_model.ground_truth`) is data the reward functions read, not the
# `reward_model` algorithm plugin; the default plugins' names are plain words the core uses
# as words ("serve a request", the core's `rewards` machinery and token rewards, the core's
# task registry `hfsdk.core.tasks` that the built-in `tasks` plugin registers into, the
# `policy_losses` registry the plugin of that name registers into,
# the core's validation schedule and `ValidationResult`, worker faults and the core's fault points;
# the core's metrics module `hfsdk.core.trainer.tracking` whose sinks the `tracking` plugin adds).
OTHER_MEANINGS = {
    "reward_model", "serve", "rewards", "tasks", "policy_losses",
    "validation", "faults", "tracking",
}  # fmt: skip


def _plugin_distributions() -> dict[str, set[str]]:
    """Entry-point name -> {entry-point name, import package} of every repo plugin."""
    out: dict[str, set[str]] = {}
    for pyproject in [
        *ROOT.glob("plugins/*/pyproject.toml"),
        *ROOT.glob("examples/*/pyproject.toml"),
    ]:
        project = tomllib.loads(pyproject.read_text())["project"]
        for name, target in project.get("entry-points", {}).get("hfsdk", {}).items():
            out[name] = {name, target.split(".")[0]}
    return out


def _registered_names(plugins: set[str]) -> set[str]:
    """What those plugins register as algorithms and backends (the names the core once used)."""
    names = set()
    for kind in ("algorithms", "training_backends", "rollout_backends"):
        registry = hfsdk.get_registry(kind)
        names |= {name for name, entry in registry.items() if entry.plugin in plugins}
    return names


def _mentions(names: set[str]) -> list[str]:
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(names))) + r")(?![\w-])")
    found = []
    for path in sorted(CORE.rglob("*.py")):
        if any(path.is_relative_to(exempt) for exempt in EXEMPT):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in pattern.finditer(line):
                found.append(
                    f"{path.relative_to(ROOT)}:{number}: {match.group(1)!r}: {line.strip()}"
                )
    return found


def test_the_checked_names_are_the_real_ones() -> None:
    plugins = _plugin_distributions()
    assert {"grpo", "ppo", "remax", "safe_rlhf", "backend_fsdp"} <= set(plugins)
    assert {"fsdp", "hf", "grpo", "safe_rlhf"} <= _registered_names(set(plugins))
    # The scan itself finds a mention (so an empty result below means something).
    assert _mentions({"HfsdkError"})


def test_core_mentions_no_plugin() -> None:
    plugins = _plugin_distributions()
    names = set().union(*plugins.values()) | _registered_names(set(plugins))
    found = _mentions(names - OTHER_MEANINGS)
    assert not found, "hfsdk/core names plugins:\n" + "\n".join(found)
