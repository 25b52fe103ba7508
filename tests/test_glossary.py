"""The glossary under the page: every symbol and short form the page shows -- each Greek letter, each
letter of a formula, the parts of a run's label (k=auto≤8, N=16, tree 2x3), nats, prefix×12, knee --
has a line of its own in both languages, and a language switch redraws it."""
from __future__ import annotations

import re

import pytest

from app.i18n import DEFAULT_LANG, TEXT, t
from app.views.glossary import GLOSSARY, glossary_markdown
from core.api.request import DecodeRequest
from core.studies.batch_size_figure import KNEE

LANGS = ("zh", "en")
GREEK = re.compile(r"[\u03b1-\u03c9]")
FORMULA = re.compile(r"[(=/·]")  # a bold span with a bracket, =, / or · is a formula
LETTER = re.compile(r"(?<![\w{])[A-Za-z](?![\w}])")  # a letter standing alone: a formula's variable
# the run labels the page prints (status lines, tables, legends): drafter · shape · options
LABELS = [DecodeRequest.of("我爱", drafter="eagle3", k="auto", eagle_nodes=16).label(),
          DecodeRequest.of("我爱", drafter="draft", tree="2x3").label()]


def page_texts(lang: str) -> list[str]:
    """What the page writes in ``lang`` outside the glossary: its texts and the run labels."""
    return [pair[LANGS.index(lang)] for key, pair in TEXT.items() if not key.startswith("gloss.")] + LABELS


def page_symbols(lang: str) -> set[str]:
    """The symbols and short forms in what the page writes in ``lang``."""
    texts = page_texts(lang)
    formulas = [span for text in texts for span in text.split("**")[1::2] if FORMULA.search(span)]
    symbols = set(GREEK.findall(" ".join(texts))) | {letter for span in formulas for letter in LETTER.findall(span)}
    symbols |= {part for label in LABELS for part in label.split(" · ")[1:]}
    knee = re.split("[:：]", t("batch.knee", lang, tokens=4, factor=KNEE))[0]
    return symbols | {"nats", t("serve.prefix_col", lang, n=12), knee}


def glossed(lang: str) -> set[str]:
    """The terms the glossary explains in ``lang``: each line's bold heads."""
    return {term for name in GLOSSARY for term in t(f"gloss.{name}", lang).split("**")[1::2]}


@pytest.mark.parametrize("lang", LANGS)
def test_every_symbol_the_page_shows_has_a_glossary_line(lang):
    symbols = page_symbols(lang)
    assert {"τ", "α", "k", "c", "v", "p", "q", "k=auto≤8", "N=16", "tree 2x3", "nats"} <= symbols  # the finder sees
    assert {"拐点", "前缀×12"} <= symbols if lang == "zh" else {"knee", "prefix×12"} <= symbols
    assert "nats" in t("tree.top5", lang, h=1.0) and f"{KNEE}" in t("gloss.knee", lang)  # the knee as measured
    assert sorted(symbols - glossed(lang)) == []


def test_the_glossary_is_written_in_both_languages_and_follows_the_switch():
    from app.ui import build_app

    for name in GLOSSARY:
        zh, en = TEXT[f"gloss.{name}"]
        assert re.search(r"[\u4e00-\u9fff]", zh) and not re.search(r"[\u4e00-\u9fff]", en), name
    assert glossed("zh") - {"拐点", "前缀×12"} == glossed("en") - {"knee", "prefix×12"}  # the same symbols
    demo = build_app("tiny")
    [notes] = [block for block in demo.blocks.values() if getattr(block, "elem_id", None) == "app-glossary-notes"]
    assert notes.value == glossary_markdown(DEFAULT_LANG)
    [switch] = [fn for fn in demo.fns.values() if fn.api_name == "language"]
    for lang in LANGS:
        *_, shown = switch.fn(lang, None, *(c.value for c in switch.inputs[2:]))
        assert shown[notes] == glossary_markdown(lang)
