"""Write docs/config_reference.md from the config classes' help metadata."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from config_reference import config_reference_markdown  # scripts/config_reference.py

TARGET = Path(__file__).resolve().parents[1] / "docs" / "config_reference.md"


def main() -> None:
    """Regenerate the reference atomically (temp file + rename)."""
    # A parser even without options, so ``--help`` explains instead of regenerating.
    argparse.ArgumentParser(
        description="Regenerate docs/config_reference.md from the config "
        "classes' help metadata (scripts/config_reference.py). Takes no options."
    ).parse_args()
    text = config_reference_markdown()
    fd, tmp = tempfile.mkstemp(dir=TARGET.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    # mkstemp creates the file 0600 and os.replace keeps that mode; docs are world-readable.
    os.chmod(tmp, 0o644)
    os.replace(tmp, TARGET)
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
