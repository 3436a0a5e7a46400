"""The GPU check's carried wheels (``scripts/gpu_wheels.txt``): fetch, size, pick and install.

    python scripts/gpu_wheels.py fetch DIR      # here (PyPI): download every listed wheel
    python scripts/gpu_wheels.py sizes          # the list with sizes and the worst-case total
    python scripts/gpu_wheels.py install DIR TARGET   # there: the wheels this machine needs

``install`` runs ``pip install --no-index --no-deps --target TARGET`` on the
wheels whose condition holds on this interpreter (``always``, or ``below
NAME VERSION`` when the installed ``NAME`` is older or missing); without pip
it unpacks them into ``TARGET`` (they are plain wheels: no scripts needed).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

LIST = Path(__file__).resolve().with_name("gpu_wheels.txt")
LIMIT_BYTES = 64 * 2**20
"""What may travel with the tree to the GPU machine."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64")  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class Wheel:
    """One line of the list."""

    requirement: str
    filename: str
    size: int
    below: tuple[str, str] | None = None
    """``(name, version)``: install only when the machine's ``name`` is older than ``version``."""

    def needed(self) -> bool:
        """Whether this interpreter needs the wheel."""
        if self.below is None:
            return True
        name, minimum = self.below
        try:
            return _release(version(name)) < _release(minimum)
        except PackageNotFoundError:
            return True


def _release(text: str) -> tuple[int, ...]:
    """``"24.0.1rc1"`` -> ``(24, 0, 1)``: enough to compare release floors (stdlib only: this
    runs before anything is installed)."""
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def read_list(path: Path = LIST) -> list[Wheel]:
    """The wheels of ``path`` (comments and blank lines skipped)."""
    wheels = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) == 4 and fields[3] == "always":
            below = None
        elif len(fields) == 6 and fields[3] == "below":
            below = (fields[4], fields[5])
        else:
            raise SystemExit(f"{path}:{number}: expected 'REQ FILE BYTES always|below NAME VER'")
        wheels.append(Wheel(requirement=fields[0], filename=fields[1], size=int(fields[2]),
                            below=below))  # fmt: skip
    return wheels


def fetch(target: Path) -> None:
    """Download every listed wheel into ``target`` and check names and sizes."""
    target.mkdir(parents=True, exist_ok=True)
    for wheel in read_list():
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--python-version", "3.12", "-d", str(target), wheel.requirement]  # fmt: skip
        for platform in PLATFORMS:
            command += ["--platform", platform]
        subprocess.run(command, check=True)
        got = target / wheel.filename
        if not got.exists() or got.stat().st_size != wheel.size:
            raise SystemExit(
                f"{wheel.requirement}: expected {wheel.filename} of {wheel.size} bytes"
            )
    print(f"{len(read_list())} wheels in {target}")


def sizes() -> None:
    """Print the list, the always-carried total and the worst case against the limit."""
    wheels = read_list()
    for w in wheels:
        when = "always" if w.below is None else f"if {w.below[0]} < {w.below[1]}"
        print(f"{w.requirement:28} {w.size / 2**20:7.2f} MiB  {when}")
    always = sum(w.size for w in wheels if w.below is None)
    total = sum(w.size for w in wheels)
    print(f"always: {always / 2**20:.1f} MiB; all: {total / 2**20:.1f} MiB "
          f"(limit {LIMIT_BYTES / 2**20:.0f} MiB)")  # fmt: skip
    if total > LIMIT_BYTES:
        raise SystemExit("the wheels do not fit the limit")


def install(source: Path, target: Path) -> None:
    """Install the wheels this machine needs from ``source`` into ``target``."""
    picked = []
    for wheel in read_list():
        if not wheel.needed():
            continue
        path = source / wheel.filename
        if not path.exists():
            raise SystemExit(f"{path} is missing; fetch it: python scripts/gpu_wheels.py fetch DIR")
        picked.append(path)
    target.mkdir(parents=True, exist_ok=True)
    if not picked:
        return
    names = ", ".join(p.name.split("-")[0] for p in picked)
    try:
        import pip  # noqa: F401
    except ImportError:
        for path in picked:  # plain wheels: unpacking them is installing them
            with zipfile.ZipFile(path) as archive:
                archive.extractall(target)
        print(f"unpacked (no pip here): {names}")
        return
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--disable-pip-version-check", "--target", str(target), *map(str, picked)],
        check=True,
    )  # fmt: skip
    print(f"installed: {names}")


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: fetch / sizes / install."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch").add_argument("dir", type=Path)
    sub.add_parser("sizes")
    inst = sub.add_parser("install")
    inst.add_argument("dir", type=Path)
    inst.add_argument("target", type=Path)
    args = p.parse_args(argv)
    if args.command == "fetch":
        fetch(args.dir)
    elif args.command == "sizes":
        sizes()
    else:
        install(args.dir, args.target)


if __name__ == "__main__":
    main()
