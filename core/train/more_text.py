"""Openly licensed text beyond the tiny family's corpus, for the Gemma drafters' data.

The tiny family trains on public-domain text only (core.train.corpus). The drafters for
gemma-270m are Gemma model derivatives whatever they read, and the app's users type questions,
instructions and code, not only poems and novels, so their data adds (each licence recorded in
the data's manifest):

- ``sayings-zh``: the modern Chinese sayings of ``fortunes-zh`` (file ``chinese``), GPL-3.0+;
- ``debref-zh`` / ``debref-en``: the Debian Reference (Osamu Aoki et al.), a system
  administration guide with shell sessions, in simplified Chinese and in English, GPL-2.0+;
- ``pystdlib``: source files of the Python standard library that runs this program (PSF-2.0):
  code, docstrings and comments. A fixed list of modules keeps it modest.

A document is one saying, one numbered section of the guide, or one module.
"""
from __future__ import annotations

import gzip
import re
import sysconfig
from pathlib import Path

from core.train.corpus import FORTUNES_DIR, Source, read_fortunes

DEBREF_DIR = Path("/usr/share/debian-reference")
_SECTION = re.compile(r"^\d+(\.\d+)+\.[ \u00a0]\S")  # body headings: column 0, a no-break space
_CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
PYSTDLIB_MODULES = (
    "abc", "argparse", "base64", "bisect", "calendar", "csv", "dataclasses", "datetime", "difflib", "enum",
    "fractions", "functools", "glob", "heapq", "ipaddress", "locale", "os", "pathlib", "pprint", "queue",
    "random", "shutil", "statistics", "string", "tempfile", "textwrap", "threading", "typing", "uuid", "zipfile",
)


def _join_wrapped(block: list[str]) -> str:
    """One paragraph of the rendered guide: wrapped prose joined (no space between CJK lines),
    shell sessions, tables and indented code kept line by line."""
    if any(line.startswith(("$ ", "# ", "|", "+-", "  ")) for line in block):
        return "\n".join(block)
    text = block[0]
    for line in block[1:]:
        glue = "" if _CJK.search(text[-1:]) or _CJK.search(line[:1]) else " "
        text += glue + line
    return text


def read_debian_reference(language: str) -> list[str]:
    """Sections of the Debian Reference in ``language`` ("zh-cn" or "en"), from its plain-text rendering."""
    lines = gzip.decompress((DEBREF_DIR / f"debian-reference.{language}.txt.gz").read_bytes()).decode("utf-8")
    lines = lines.splitlines()
    sections: list[list[str]] = []
    for line in lines:  # the table of contents is indented: no heading matches there
        if _SECTION.match(line):
            sections.append([line.strip()])
        elif sections:
            sections[-1].append(line[4:] if line.startswith("    ") else line.strip())
    documents = []
    for section in sections:
        paragraphs, block = [], []
        for line in section + [""]:
            if line.strip():
                block.append(line.rstrip())
            elif block:
                paragraphs.append(_join_wrapped(block))
                block = []
        if len(paragraphs) > 1:  # a heading alone is a table-of-contents entry
            documents.append("\n\n".join(paragraphs))
    return documents


def pystdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def read_pystdlib() -> list[str]:
    """The modules of ``PYSTDLIB_MODULES`` that this Python ships, one document each."""
    root = pystdlib_dir()
    return [(root / f"{name}.py").read_text(encoding="utf-8") for name in PYSTDLIB_MODULES
            if (root / f"{name}.py").is_file()]


MORE_SOURCES: tuple[Source, ...] = (
    Source(
        name="sayings-zh",
        language="zh",
        apt_packages=("fortunes-zh",),
        licence="GPL-3.0-or-later (fortunes-zh, file `chinese`: modern Chinese sayings)",
        required_paths=(FORTUNES_DIR / "chinese",),
        read=lambda: read_fortunes(FORTUNES_DIR / "chinese"),
    ),
    Source(
        name="debref-zh",
        language="zh",
        apt_packages=("debian-reference-zh-cn",),
        licence="GPL-2.0-or-later (Debian Reference, simplified Chinese translation; debian-reference-zh-cn)",
        required_paths=(DEBREF_DIR / "debian-reference.zh-cn.txt.gz",),
        read=lambda: read_debian_reference("zh-cn"),
    ),
    Source(
        name="debref-en",
        language="en",
        apt_packages=("debian-reference-en",),
        licence="GPL-2.0-or-later (Debian Reference; debian-reference-en)",
        required_paths=(DEBREF_DIR / "debian-reference.en.txt.gz",),
        read=lambda: read_debian_reference("en"),
    ),
    Source(
        name="pystdlib",
        language="code",
        apt_packages=(),  # ships with every Python (Debian: libpython3.X-stdlib)
        licence="PSF-2.0 (Python standard library source)",
        required_paths=(pystdlib_dir() / "os.py",),
        read=read_pystdlib,
    ),
)
