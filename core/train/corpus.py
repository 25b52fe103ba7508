"""Training text for the tiny model family, rebuilt from installed Debian packages.

Only public-domain texts are used:

- ``tang300`` and ``song100`` from ``fortunes-zh``: 300 Tang poems and 100 Song ci in
  simplified Chinese (the poems are public domain; the package's other file, the modern
  ``chinese`` sayings collection, is GPL-3.0+ and is deliberately left out);
- ``austen``: Jane Austen's six novels from ``r-cran-janeaustenr`` (public-domain text,
  MIT-licensed package), exported through ``Rscript``;
- ``kjv``: the King James Bible from ``bible-kjv-text``, dumped by the ``bible`` program
  of ``bible-kjv`` (public domain).

A document is one poem (its lines, without title and author), one novel chapter or one
Bible chapter. Every 20th document of
each source (index 19, 39, ...) is held out for evaluation and never trained on.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.common.files import lab_cache, write_text_atomic

HELDOUT_EVERY = 20
CACHE_VERSION = 2  # bump when a reader changes, so stale caches are rebuilt
FORTUNES_DIR = Path("/usr/share/games/fortunes")
AUSTEN_R_LIBRARY = Path("/usr/lib/R/site-library/janeaustenr")
KJV_DATA = Path("/usr/lib/bible.data")

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_AUSTEN_CHAPTER = re.compile(r"^(CHAPTER|Chapter) [0-9IVXLC]+\.?$")
_KJV_REFERENCE = re.compile(r"^(\w+?)(\d+):(\d+) (.*)$")


class MissingPackagesError(RuntimeError):
    """Raised when the Debian packages that hold the corpus are not installed."""


@dataclass(frozen=True)
class Source:
    """One text of the corpus and where it comes from."""

    name: str
    language: str  # "zh" or "en"
    apt_packages: tuple[str, ...]
    licence: str
    required_paths: tuple[Path, ...]
    read: Callable[[], list[str]]  # returns the documents, in the text's own order


@dataclass(frozen=True)
class Corpus:
    """Documents per source name, split into training and held-out parts."""

    train: dict[str, list[str]]
    heldout: dict[str, list[str]]

    def chars(self, part: str) -> dict[str, int]:
        """Number of characters per source in ``part`` ("train" or "heldout")."""
        documents = self.train if part == "train" else self.heldout
        return {name: sum(len(doc) for doc in docs) for name, docs in documents.items()}


def read_fortunes(path: Path) -> list[str]:
    """Parse a fortune file into documents: ANSI colours stripped, blank lines dropped."""
    text = _ANSI_ESCAPE.sub("", path.read_text(encoding="utf-8"))
    documents = []
    for entry in re.split(r"^%$", text, flags=re.MULTILINE):
        lines = [line.strip() for line in entry.splitlines() if line.strip()]
        if lines:
            documents.append("\n".join(lines))
    return documents


def poem_body(document: str) -> str:
    """Drop the title and author lines (``《…》``, ``题目:…``, ``作者:…``) of a poem."""
    lines = document.splitlines()
    return "\n".join(line for line in lines if not line.startswith(("《", "题目", "作者")))


def read_poems(path: Path) -> list[str]:
    """Poem bodies of a fortunes-zh poem file, one document per poem."""
    return [body for body in map(poem_body, read_fortunes(path)) if body]


def _paragraphs(lines: list[str]) -> list[str]:
    """Join wrapped lines into paragraphs (blank-line separated), normalising spaces."""
    paragraphs, current = [], []
    for line in lines + [""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(re.sub(r" {2,}", " ", " ".join(current)))
            current = []
    return paragraphs


def read_austen() -> list[str]:
    """Export the six novels with Rscript; one document per chapter (front matter too)."""
    script = 'x <- janeaustenr::austen_books(); writeLines(paste0(as.integer(x$book), "\\t", x$text))'
    output = subprocess.run(
        ["Rscript", "-e", script], check=True, capture_output=True, text=True, encoding="utf-8"
    ).stdout
    chapters: list[list[str]] = []
    previous_book = None
    for row in output.splitlines():
        book, _, line = row.partition("\t")
        line = line.replace("_", "")  # _word_ marks italics in these texts
        if book != previous_book or _AUSTEN_CHAPTER.match(line.strip()):
            chapters.append([])
            previous_book = book
        chapters[-1].append(line)
    return ["\n\n".join(_paragraphs(lines)) for lines in chapters if _paragraphs(lines)]


def read_kjv() -> list[str]:
    """Dump the whole King James Bible; one document per chapter, one verse per line."""
    output = subprocess.run(
        ["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True
    ).stdout
    chapters: dict[tuple[str, str], list[str]] = {}
    for line in output.splitlines():
        match = _KJV_REFERENCE.match(line)
        if match:
            book, chapter, _verse, verse_text = match.groups()
            chapters.setdefault((book, chapter), []).append(verse_text.strip())
    return ["\n".join(verses) for verses in chapters.values()]


def poems(name: str, what: str) -> Source:
    """The fortunes-zh file ``name``, one document per poem."""
    return Source(
        name=name,
        language="zh",
        apt_packages=("fortunes-zh",),
        licence=f"public domain ({what}); packaged in fortunes-zh (GPL-3.0+)",
        required_paths=(FORTUNES_DIR / name,),
        read=lambda: read_poems(FORTUNES_DIR / name),
    )


SOURCES: tuple[Source, ...] = (
    poems("tang300", "Tang dynasty poems"),
    poems("song100", "Song dynasty ci"),
    Source(
        name="austen",
        language="en",
        apt_packages=("r-cran-janeaustenr", "r-base-core"),
        licence="public domain (Jane Austen's novels); packaged in r-cran-janeaustenr (MIT)",
        required_paths=(AUSTEN_R_LIBRARY, Path("/usr/bin/Rscript")),
        read=read_austen,
    ),
    Source(
        name="kjv",
        language="en",
        apt_packages=("bible-kjv", "bible-kjv-text"),
        licence="public domain (King James Version, 1611); packaged in bible-kjv-text",
        required_paths=(KJV_DATA, Path("/usr/bin/bible")),
        read=read_kjv,
    ),
)


def missing_packages(sources: tuple[Source, ...] = SOURCES) -> list[str]:
    """Debian packages that must be installed before the corpus can be built."""
    missing: list[str] = []
    for source in sources:
        if not all(path.exists() for path in source.required_paths):
            missing += [pkg for pkg in source.apt_packages if pkg not in missing]
    return missing


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/speculative-decoding-lab/tiny-corpus`` (``~/.cache`` by default)."""
    return lab_cache("tiny-corpus")


def split_heldout(documents: list[str]) -> tuple[list[str], list[str]]:
    """Every ``HELDOUT_EVERY``-th document goes to held-out, the rest to training."""
    heldout = [doc for i, doc in enumerate(documents) if i % HELDOUT_EVERY == HELDOUT_EVERY - 1]
    train = [doc for i, doc in enumerate(documents) if i % HELDOUT_EVERY != HELDOUT_EVERY - 1]
    return train, heldout


def load_documents(source: Source, cache_dir: Path, rebuild: bool = False) -> list[str]:
    """Documents of ``source``, read from ``cache_dir`` or (re)built from the package."""
    cache_file = cache_dir / f"{source.name}.v{CACHE_VERSION}.json"
    if rebuild or not cache_file.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(cache_file, json.dumps(source.read(), ensure_ascii=False))
    return json.loads(cache_file.read_text(encoding="utf-8"))


def build_corpus(
    cache_dir: Path | None = None, rebuild: bool = False, sources: tuple[Source, ...] = SOURCES
) -> Corpus:
    """Build (or load from cache) the corpus of ``sources``, split into training and held-out.

    Raises MissingPackagesError naming the ``apt-get install`` line when a package is absent.
    """
    missing = missing_packages(sources)
    if missing:
        raise MissingPackagesError(
            "the tiny corpus needs Debian packages that are not installed; run:\n"
            f"  apt-get install {' '.join(missing)}"
        )
    cache_dir = cache_dir or default_cache_dir()
    train, heldout = {}, {}
    for source in sources:
        train[source.name], heldout[source.name] = split_heldout(
            load_documents(source, cache_dir, rebuild)
        )
    return Corpus(train=train, heldout=heldout)
