"""``hfsdk config import`` on what is not a config (issue 35): one line, exit 2, fast, and
nothing written (an ``--out`` stays as it was)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hfsdk.core.cli.main import main
from hfsdk.testing import alias_bomb

IMPORT = ("config", "import", "--from", "verl")
UNCLOSED = (
    "set -x\n"
    "python3 -m verl.trainer.main_ppo \\\n"
    "    data.train_batch_size=32 \\\n"
    '    actor_rollout_ref.model.path="Qwen/Qwen2.5-0.5B \\\n'
    "    trainer.total_epochs=2\n"
)


def _file(tmp: Path, name: str, content: str | bytes) -> str:
    path = tmp / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


def _bomb_dir(tmp: Path) -> str:
    """A verl config directory whose ppo_trainer.yaml is an alias bomb (Hydra reads it)."""
    (tmp / "verl_config").mkdir()
    (tmp / "verl_config" / "ppo_trainer.yaml").write_text(alias_bomb())
    return str(tmp / "verl_config")


def _dir(tmp: Path) -> str:
    (tmp / "configs").mkdir()
    (tmp / "configs" / "ppo.yaml").write_text("data: {}\n")
    return str(tmp / "configs")


Case = tuple[str, Callable[[Path], list[str]], str]
CASES: list[Case] = [
    (
        "alias-bomb",
        lambda t: [*IMPORT, _file(t, "bomb.yaml", alias_bomb())],
        r"aliases expand to more than 1,000,000 nodes",
    ),
    (
        "config-dir-alias-bomb",
        lambda t: [
            *IMPORT,
            "--verl-config-dir",
            _bomb_dir(t),
            _file(t, "run.sh", "python3 -m verl.trainer.main_ppo data.train_batch_size=32\n"),
        ],
        r"ppo_trainer\.yaml': YAML aliases expand to more than 1,000,000 nodes",
    ),
    (
        "binary-file",
        lambda t: [*IMPORT, _file(t, "model.bin", bytes(range(256)) * 8)],
        r"'.*model\.bin' is not a text file",
    ),
    (
        "directory",
        lambda t: [*IMPORT, _dir(t)],
        r"'.*configs' is a directory; pass a file in it.*--verl-config-dir",
    ),
    (
        "unclosed-quote",
        lambda t: [
            *IMPORT,
            _file(t, "run.sh", UNCLOSED),
            "--out",
            _file(t, "out.yaml", "kept: as it was\n"),
        ],
        r"the \" quote opened on line 4 .* is never closed.*nothing was written",
    ),
]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name, build, pattern = case
    monkeypatch.chdir(tmp_path)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    args = build(inputs)
    before = _files(tmp_path)
    started = time.perf_counter()
    with pytest.raises(SystemExit) as info:
        main(args)
    took = time.perf_counter() - started
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert info.value.code == 2, err[-2000:]
    assert len(lines) == 1, err[:2000]
    assert "Traceback" not in err + out and "internal error" not in err
    assert lines[0].startswith("Error: ") and len(lines[0]) < 600, lines[0][:2000]
    assert re.search(pattern, lines[0]), lines[0]
    assert took < 60, f"{name} took {took:.1f} s"  # the bomb used to hang for good
    assert _files(tmp_path) == before, "a file was written or changed"
