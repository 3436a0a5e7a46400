"""The CLI's refusal contract for bad input: exit 2, one ``Error:`` line, nothing written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any


def _cli_main() -> Callable[[list[str]], Any]:
    """The ``hfsdk`` command as installed (its console-script entry point)."""
    (script,) = entry_points(group="console_scripts", name="hfsdk")
    return script.load()


def alias_bomb(levels: int = 9) -> str:
    """A YAML "billion laughs" document: ``levels`` levels of nine aliases (9^9 leaves at 9),
    under ``trainer.total_steps``; every YAML reader must refuse it fast."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    previous = "a"
    for name in "bcdefghijk"[: levels - 1]:
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
        previous = name
    lines.append(f"trainer:\n  total_steps: *{previous}")
    return "\n".join(lines) + "\n"


def assert_refused_in_one_line(
    args: Sequence[str], pattern: str, capsys: Any, *, root: Path, within_s: float = 60.0
) -> str:
    """Run ``hfsdk ARGS`` in-process and check the refusal contract: exit 2, one
    ``Error:`` line matching ``pattern`` (no traceback), within ``within_s``, and no
    path under ``root`` made, written or changed (directories too). Returns the line."""
    import re
    import time

    main = _cli_main()

    def paths() -> dict[str, bytes | None]:
        # Every path, not only files: a command that makes its run directory and then
        # refuses has written something (a file's value is its bytes, anything else None).
        return {
            p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None
            for p in root.rglob("*")
            if "__pycache__" not in p.parts
        }

    before = paths()
    started = time.perf_counter()
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    took = time.perf_counter() - started
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err[-2000:]
    assert len(lines) == 1, err[:2000]
    assert "Traceback" not in err + out and "internal error" not in err
    assert lines[0].startswith("Error: ") and len(lines[0]) < 600, lines[0][:2000]
    assert re.search(pattern, lines[0]), lines[0]
    assert took < within_s, f"took {took:.1f} s"  # an alias bomb used to hang for good
    after = paths()  # compared with 0 where absent: None is a directory, not a missing path
    changed = sorted(k for k in after.keys() | before.keys() if after.get(k, 0) != before.get(k, 0))
    assert not changed, f"paths under root were made, written, changed or removed: {changed[:5]}"
    return lines[0]
