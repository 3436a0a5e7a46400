"""Inputs that used to hang, crash or mislead (issue 35): one line, exit 2, fast, nothing written.

Each case runs the CLI in-process on input built under ``tmp_path`` and checks
that stderr is exactly one ``Error:`` line matching the case, the status is 2
(bad input), it took seconds (an alias bomb used to hang), no file appeared
(a run directory, or an ``--out`` that must stay as it was) and Ray never started.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hfsdk_testing import alias_bomb, assert_refused_in_one_line

RUN = ("run", "--algo", "grpo", "--quiet", "trainer.total_steps=2")
TOOLS = (*RUN, "rollout.multi_turn.max_response_tokens=32")  # within the tiny model's positions


def flow_alias_bomb() -> str:
    """The same bomb on one line (a command-line value)."""
    parts = ["&a [" + ", ".join(["lol"] * 9) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        parts.append(f"&{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    return "[" + ", ".join(parts) + "]"


def _file(tmp: Path, name: str, content: str | bytes) -> str:
    path = tmp / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


BINARY = bytes(range(256)) * 8
SYNTAX_ERROR_TOOL = "def add(a: int, b: int) -> int:\n    return a +\n"

Case = tuple[str, Callable[[Path], list[str]], str]
CASES: list[Case] = [
    # -- YAML alias bombs, wherever YAML is read
    (
        "run-config-alias-bomb",
        lambda t: [*RUN, "--config", _file(t, "bomb.yaml", alias_bomb())],
        r"aliases expand to more than 1,000,000 nodes",
    ),
    (
        "override-alias-bomb",
        lambda t: [*RUN, f"trainer.loggers={flow_alias_bomb()}"],
        r"override 'trainer\.loggers': YAML aliases expand to more than 1,000,000 nodes",
    ),
    (
        "override-recursive-alias",
        lambda t: [*RUN, "trainer.loggers=&a [jsonl, *a]"],
        r"refers to a node that contains it",
    ),
    (
        "run-config-recursive-alias",
        lambda t: [*RUN, "--config", _file(t, "loop.yaml", "data: &d {x: *d}\n")],
        r"refers to a node that contains it",
    ),
    # -- what is not a config
    (
        "run-binary-config",
        lambda t: [*RUN, "--config", _file(t, "model.bin", BINARY)],
        r"'.*model\.bin' is not a text file",
    ),
    # -- tools
    (
        "tool-file-syntax-error",
        lambda t: [
            *TOOLS,
            f"rollout.multi_turn.tools=[{_file(t, 'calc.py', SYNTAX_ERROR_TOOL)}:add]",
        ],
        r"tool '.*calc\.py:add': the file has a syntax error \(calc\.py, line 2",
    ),
    (
        "tool-entry-a-number",
        lambda t: [*TOOLS, "rollout.multi_turn.tools=[42]"],
        r"rollout\.multi_turn\.tools: the entry 42 \(int\) is not a tool; give a registered",
    ),
    # -- settings that failed deep inside a run
    (
        "keep-best-without-validation",
        lambda t: [*RUN, "trainer.keep_best=val/pass@1", "trainer.val_every=0"],
        r"trainer\.keep_best=val/pass@1 is a validation metric but no validation runs",
    ),
    (
        "prompt-and-response-beyond-positions",
        lambda t: [*RUN, "rollout.max_response_length=200"],
        r"data\.max_prompt_length=64 \+ rollout\.max_response_length=200 = 264 tokens exceed "
        r"the 128 positions of actor\.model_path",
    ),
    (
        "multi-turn-budget-beyond-positions",
        lambda t: [
            *RUN,
            "rollout.multi_turn.tools=[add]",
            "rollout.multi_turn.max_response_tokens=100",
        ],
        r"rollout\.multi_turn\.max_response_tokens=100 = 164 tokens exceed the 128 positions",
    ),
    (
        "prompt-lengths-disagree-on-the-command-line",
        lambda t: [*RUN, "data.max_prompt_length=96", "rollout.max_prompt_length=16"],
        r"the command line: rollout\.max_prompt_length=16 disagrees with "
        r"data\.max_prompt_length=96; it follows from them .*remove rollout\.max_prompt_length",
    ),
    (
        "prompt-lengths-disagree-in-a-file",
        lambda t: [
            *RUN,
            "--config",
            _file(t, "c.yaml", "data: {max_prompt_length: 96}\nrollout: {max_prompt_length: 16}\n"),
        ],
        r"config file '.*c\.yaml': rollout\.max_prompt_length=16 disagrees with "
        r"data\.max_prompt_length=96",
    ),
]


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a case that would start Ray: bad input is refused before."""
    import ray

    def refuse(*_a: object, **_k: object) -> None:
        raise SystemError("ray.init was called: this bad input was not caught before Ray")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_ray: None,
) -> None:
    _name, build, pattern = case
    monkeypatch.chdir(tmp_path)  # a default runs/<algo>-<ts> would land here
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    assert_refused_in_one_line(build(inputs), pattern, capsys, root=tmp_path)


def test_an_alias_bomb_is_refused_in_well_under_a_second() -> None:
    from hfsdk.core.config.safe_yaml import YamlBombError, load_yaml_text

    started = time.perf_counter()
    with pytest.raises(YamlBombError, match="alias bomb"):
        load_yaml_text(alias_bomb(), source="bomb.yaml")
    assert time.perf_counter() - started < 1.0  # measured ~5 ms (shared host)
