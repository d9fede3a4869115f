"""The links between the project's Markdown pages point at files and headings that exist (headings are renamed when
upstream moves on, e.g. `main` became 5.25: a link to the old anchor then silently lands at the top of the page)."""

import functools
import re
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "source" / "en").glob("*.md"))]
# [text](target) with a relative target: a Markdown page, an anchor in this page, or both
LINK = re.compile(r"\]\((?!https?://)([^)\s]*?\.md)?(?:#([^)\s]+))?\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (but `-` and `_`), spaces made `-`."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    return frozenset(github_anchor(heading) for heading in HEADING.findall(FENCE.sub("", page.read_text())))


def links(page: Path) -> list[tuple[Path, str | None]]:
    text = FENCE.sub("", page.read_text())
    return [
        ((page.parent / target).resolve() if target else page, anchor)
        for target, anchor in LINK.findall(text)
        if target or anchor
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_links_resolve(page):
    broken = []
    for target, anchor in links(page):
        if not target.exists():
            broken.append(f"{target.relative_to(ROOT)} (no such file)")
        elif anchor and anchor not in anchors(target):
            broken.append(f"{target.relative_to(ROOT)}#{anchor} (no such heading)")
    assert not broken, f"{page.name} links to: " + ", ".join(broken)


def test_github_anchor():
    assert (
        github_anchor("Assisted decoding on the 5.24 backport (step 6)")
        == "assisted-decoding-on-the-524-backport-step-6"
    )
    assert github_anchor("On 5.25 (upstream `main`)") == "on-525-upstream-main"
