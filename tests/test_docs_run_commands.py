"""Every ``hfsdk run`` command of README.md and docs/*.md resolves through ``config show``.

A command is read as a shell reads it (``\\`` continuations joined, quoting
and ``# comments`` by ``shlex``) from the bash/sh/shell/unlabelled fenced
blocks, and its arguments — less ``run``'s own options that do not change the
config (``--run-dir``, ``--ray-address``, ``--quiet``) — are handed to the
CLI's ``config show``, which must exit 0. Commands that need a file or package
a checkout does not have are in ``SKIPS`` with the reason; a skip entry that
matches no command fails, so the table stays honest.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from hfsdk.core.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_FENCES = {"bash", "sh", "shell", ""}
# ``run``'s options that only say where/how to run, with whether they take a value.
RUN_ONLY_OPTIONS = {"--run-dir": True, "--ray-address": True, "--quiet": False}

# (doc relative to the repository root, a substring of the command) -> why it is not run.
SKIPS: dict[tuple[str, str], str] = {
    ("README.md", "--config my.yaml"): "placeholder config file my.yaml",
    ("README.md", "actor.model_path=DIR"): "placeholder model directory DIR (megatron)",
    ("docs/training.md", "--config my.yaml"): "placeholder config file my.yaml",
    ("docs/backends.md", "actor.model_path=DIR"): "placeholder model directory DIR (megatron)",
    ("docs/migrating.md", "--config run.yaml"): "placeholder config file run.yaml",
    ("docs/agents.md", "./my_agent.py:calculator_agent"): "placeholder agent file ./my_agent.py",
    ("docs/agents.md", "examples/hfsdk-agent-example/tool_use.yaml"): (
        "needs the examples/hfsdk-agent-example plugin installed"
    ),
    ("docs/agents.md", "actor.model_path=MY_MODEL"): "placeholder model MY_MODEL and data files",
    ("docs/placement.md", "placement.cluster=local.yaml"): (
        "placeholder profile local.yaml and a <task> placeholder"
    ),
}


def _commands() -> list[tuple[str, int, str]]:
    """``(doc, line, command)`` for every ``hfsdk run`` line of the docs' shell blocks."""
    found = []
    for doc in DOCS:
        name = doc.relative_to(ROOT).as_posix()
        lines = doc.read_text().splitlines()
        fence: str | None = None
        i = 0
        while i < len(lines):
            opened = re.match(r"^\s*```(\w*)", lines[i])
            if opened:
                fence = None if fence is not None else opened.group(1)
            elif fence in SHELL_FENCES and lines[i].lstrip().startswith("hfsdk run "):
                start, command = i, lines[i]
                while command.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command.rstrip()[:-1] + " " + lines[i]
                found.append((name, start + 1, command.strip()))
            i += 1
    return found


COMMANDS = _commands()


def _skip_reason(doc: str, command: str) -> str | None:
    for (skip_doc, fragment), reason in SKIPS.items():
        if skip_doc == doc and fragment in command:
            return reason
    return None


def _config_args(command: str) -> list[str]:
    """The arguments after ``hfsdk run``, less the run-only options."""
    words = shlex.split(command, comments=True)[2:]
    args: list[str] = []
    i = 0
    while i < len(words):
        option, _, _ = words[i].partition("=")
        if option in RUN_ONLY_OPTIONS:
            # ``--run-dir X`` skips its value too; ``--run-dir=X`` is one word.
            i += 2 if RUN_ONLY_OPTIONS[option] and "=" not in words[i] else 1
            continue
        args.append(words[i])
        i += 1
    return args


def test_the_docs_have_run_commands() -> None:
    assert len(COMMANDS) >= 30, COMMANDS
    assert any(doc == "README.md" for doc, _, _ in COMMANDS)


def test_every_skip_entry_matches_a_command() -> None:
    stale = [
        key
        for key in SKIPS
        if not any(doc == key[0] and key[1] in command for doc, _, command in COMMANDS)
    ]
    assert not stale, f"SKIPS entries that match no `hfsdk run` line any more; remove them: {stale}"


@pytest.mark.parametrize(
    ("doc", "line", "command"), COMMANDS, ids=[f"{doc}:{line}" for doc, line, _ in COMMANDS]
)
def test_run_command_resolves(
    doc: str, line: int, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = _skip_reason(doc, command)
    if reason is not None:
        pytest.skip(reason)
    with pytest.raises(SystemExit) as exited:
        main(["config", "show", *_config_args(command)])
    err = capsys.readouterr().err
    assert exited.value.code == 0, f"{doc}:{line}: `{command}` is refused:\n{err}"
