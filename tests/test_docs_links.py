"""Every relative link in README.md and docs/*.md points at a file or folder that exists (anchors aside)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def local_targets(text: str):
    text = FENCE.sub("", text)
    for match in LINK.finditer(text):
        target = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same page
        yield target.split("#", 1)[0].split("?", 1)[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    missing = [t for t in local_targets(page.read_text(encoding="utf-8")) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_the_checker_sees_a_missing_file():
    assert list(local_targets("[a](nowhere.md#x) [b](https://example.org) [c](#here) ![d](img.png)")) == [
        "nowhere.md", "img.png"]
