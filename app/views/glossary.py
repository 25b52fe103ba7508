"""The glossary under the page: every symbol and short form the views show (τ, α, k=auto≤8, N=16,
v, c, nats, prefix×12, knee, ...), one line each in both languages (the ``gloss.*`` texts)."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..i18n import t
from .page import Page, View

# The ``gloss.<name>`` texts, in the order the glossary lists them; each starts with its symbol in bold.
GLOSSARY = ("tau", "alpha", "k", "k_auto", "tree", "n_nodes", "c", "v", "p_q", "nats", "prefix", "knee")


def glossary_markdown(lang: str) -> str:
    return "\n".join(f"- {t('gloss.' + name, lang)}" for name in GLOSSARY)


@dataclass
class GlossaryView(View):
    notes: gr.Markdown

    @property
    def outputs(self) -> list:
        return [self.notes]

    def render(self, session, lang: str) -> dict:
        return {self.notes: glossary_markdown(lang)}


def build(page: Page) -> GlossaryView:
    with page.labels.make(gr.Accordion, label="gloss.title", open=False, elem_id="app-glossary"):
        notes = gr.Markdown(glossary_markdown(page.labels.lang), elem_id="app-glossary-notes")
    return GlossaryView(notes)
