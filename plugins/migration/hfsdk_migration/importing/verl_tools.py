"""verl's multi-turn rollout (``actor_rollout_ref.rollout.multi_turn``) and its tool config.

``multi_turn.enable: true`` maps onto ``rollout.multi_turn``: ``max_assistant_turns``
→ ``max_turns``, ``format`` (``hermes``) → ``parser``, ``max_tool_response_length``
→ ``max_tool_output_chars``, and the tools of the file ``tool_config_path`` (verl's
``tools:`` YAML) become tool entries with their schemas, the verl tool classes
kept as they are (``{verl_class: module:Class, config: ..., schema: ...}``, run by
:mod:`hfsdk_agents.verl_adapter`). Other multi-turn keys are listed with reasons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hfsdk import ConfigError
from hfsdk_migration.importing.mapper import Mapper

MT = "actor_rollout_ref.rollout.multi_turn."
FORMATS = {"hermes": "hermes", "qwen": "hermes", "llama": "llama_function"}
"""verl's ``multi_turn.format`` -> hfsdk's ``rollout.multi_turn.parser``."""


def verl_tool_entries(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a verl tool config file (``tools: [{class_name, config, tool_schema}]``)."""
    from hfsdk import load_yaml_text

    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(
            f"{MT}tool_config_path={str(path)!r} does not exist; give the path of verl's tool "
            "config YAML (relative to where hfsdk config import runs)"
        )
    data = load_yaml_text(file.read_text(), source=str(file)) or {}
    tools = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(tools, list):
        raise ConfigError(f"{file}: expected a 'tools:' list of verl tool entries")
    entries = []
    for position, tool in enumerate(tools):
        if not isinstance(tool, dict) or "class_name" not in tool:
            raise ConfigError(f"{file}: tools[{position}] has no class_name")
        module, _, cls = str(tool["class_name"]).rpartition(".")
        schema = tool.get("tool_schema") or {}
        entry: dict[str, Any] = {"verl_class": f"{module}:{cls}", "schema": schema}
        if tool.get("config"):
            entry["config"] = tool["config"]
        name = (schema.get("function") or {}).get("name") if isinstance(schema, dict) else None
        if name:
            entry["name"] = name
        entries.append(entry)
    return entries


def map_multi_turn(m: Mapper) -> None:
    """``rollout.multi_turn`` from verl's ``multi_turn`` section when it is enabled."""
    if not m.get(MT + "enable"):
        return
    if m.has(MT + "max_assistant_turns"):
        m.put("rollout.multi_turn.max_turns", m.int(MT + "max_assistant_turns"))
    fmt = m.get(MT + "format")
    if fmt in FORMATS:
        m.put("rollout.multi_turn.parser", FORMATS[fmt])
    elif fmt is not None:
        m.reject(
            MT + "format", f"hfsdk tool-call parsers: {', '.join(sorted(set(FORMATS.values())))}"
        )
    if m.has(MT + "max_tool_response_length"):
        m.put("rollout.multi_turn.max_tool_output_chars", m.int(MT + "max_tool_response_length"))
    path = m.get(MT + "tool_config_path")
    if path is not None:
        m.put("rollout.multi_turn.tools", verl_tool_entries(path))
    response = m.flat.get("data.max_response_length")
    if response is not None:
        m.put("rollout.multi_turn.max_response_tokens", int(response))
