"""The README and docs/ as users get them: every relative link (and image) resolves to a file in the
repository, and none points at the design notes or seed documents, which users do not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target); <http://...> and bare URLs are not relative links.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def relative_links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


# What users get besides the pages: the shipped scenarios' descriptions and the Makefile's comments.
SHIPPED = [*PAGES, *sorted((ROOT / "scenarios").rglob("*.toml")), ROOT / "Makefile"]


@pytest.mark.parametrize("page", SHIPPED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_nothing_shipped_points_at_files_users_do_not_have(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = re.findall(r"[^\n]{0,40}(?:design\.md|seeds/|\b[Ss]eed 00\d)[^\n]{0,20}", text)
    assert not found, f"{page.relative_to(ROOT)}: {found}"


def test_the_link_finder_finds_links() -> None:
    text = ("see [a](docs/a.md#x), ![b](b.png), [c](https://x.org), [d](#top), `[e](e.md)`\n"
            "```\n[f](f.md)\n```")
    assert relative_links(text) == ["docs/a.md#x", "b.png", "e.md"]
