"""A file over the server's upload limit: Gradio refuses it in the browser with a bare "Error" in
the box (and a passing toast in English). page.js takes such a file away from Gradio first and
presses the upload's hidden button instead, whose handler says why in the page's language."""
from __future__ import annotations

import gradio as gr

from ..guard import guarded
from ..page_limits import upload_too_large


def refusal(upload: gr.File, lang: gr.Radio, status: gr.Markdown) -> None:
    """The hidden button ``<upload's elem_id>-refused`` that page.js presses for a file over
    MAX_TRACE_BYTES (the largest upload: a trace) chosen or dropped in ``upload``: ``status`` says the limit."""

    def on_refused(lang_value):
        raise upload_too_large(lang_value)

    button = gr.Button(visible="hidden", elem_id=f"{upload.elem_id}-refused")
    button.click(guarded(status)(on_refused), lang, status, api_visibility="private")
