"""Every relative link in README.md and docs/*.md names a file that exists and, for a
markdown file, a heading it has (GitHub's anchors: lower case, punctuation dropped,
spaces as hyphens, ``-1``, ``-2`` … for repeats)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"```.*?```", re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        if heading := HEADING.match(line):
            slug = re.sub(r"[^\w\- ]", "", heading.group(2).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
        found.update(re.findall(r'<a (?:name|id)="([^"]+)"', line))
    return found


def test_relative_links_reach_files_and_headings() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for link in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", link):  # http(s), mailto
                continue
            target, _, anchor = link.partition("#")
            path = (page.parent / target).resolve() if target else page
            where = f"{page.relative_to(ROOT)}: {link}"
            if not path.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{where} (no such heading)")
    assert not broken, "\n".join(broken)
