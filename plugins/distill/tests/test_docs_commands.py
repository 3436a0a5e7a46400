"""Every ``hfsdk run`` command of the docs' distillation section resolves, split as a shell
splits it (the quoting included), through the CLI's own ``config show``."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from hfsdk.core.cli.main import main

_DOCS = Path(__file__).resolve().parents[3] / "docs" / "algorithms.md"


def _section() -> str:
    text = _DOCS.read_text()
    start = text.index("## On-policy distillation")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _commands() -> list[list[str]]:
    """The ``hfsdk run`` commands of the section's bash blocks, as a shell passes them on."""
    commands = []
    for block in _section().split("```bash\n")[1:]:
        script = block.split("```")[0].replace("\\\n", " ")
        for line in script.splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] == ["hfsdk", "run"]:
                commands.append(words[2:])
    return commands


def test_the_section_has_the_commands_a_user_pastes() -> None:
    commands = [" ".join(c) for c in _commands()]
    assert len(commands) >= 7, commands
    assert any("algorithm.teachers={math: teacher_math, code: teacher_code}" in c for c in commands)
    assert any("placement.pools.rollout.devices=1" in c for c in commands)
    assert any("algorithm.top_k=8" in c for c in commands)


@pytest.mark.parametrize("args", _commands(), ids=lambda a: " ".join(a)[:60])
def test_each_command_resolves(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["config", "show", *args])
    out = capsys.readouterr()
    assert exited.value.code == 0, out.err
    config = yaml.safe_load(out.out)
    assert config["algo"] == "distill"
    for override in args:
        key, _, value = override.partition("=")
        if key.startswith("--") or not value:
            continue
        node = config
        for part in key.split("."):
            node = node[part]
        # Each setting arrived as the docs wrote it (a quoted mapping stays one value).
        assert _holds(node, yaml.safe_load(value)), (key, node)


def _holds(resolved: object, given: object) -> bool:
    """``resolved`` has every value ``given`` set (the resolved config adds the defaults)."""
    if isinstance(given, dict):
        return isinstance(resolved, dict) and all(
            k in resolved and _holds(resolved[k], v) for k, v in given.items()
        )
    if isinstance(given, list):
        return (
            isinstance(resolved, list)
            and len(resolved) == len(given)
            and all(_holds(r, g) for r, g in zip(resolved, given, strict=True))
        )
    return resolved == given
