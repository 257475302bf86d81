"""Every relative link in README.md, SECURITY.md, docs/ and experiments/ points at a file that exists (a page
moved into docs/ keeps links written from the root, the bug this catches)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    out = []
    for target in LINK.findall(CODE.sub("", path.read_text())):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the same page
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            out.append(f"{path.relative_to(root)}: {target}")
    return out


def test_relative_links_resolve():
    pages = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md"))]
    pages += sorted((ROOT / "experiments").rglob("*.md"))
    broken = [line for page in pages for line in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_a_link_written_from_the_root_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("[ok](page.md) [bad](docs/page.md) [url](https://example.org) [anchor](#x)")
    assert broken_links(page, tmp_path) == ["docs/page.md: docs/page.md"]
