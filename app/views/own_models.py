"""The "your own models" fields shared by Step by step and Compare: a target and a draft by local
folder or hub id, in place of the preset's. Shown only where the server allows them (app.py)."""
from __future__ import annotations

import gradio as gr

from ..controls import ModelPolicy
from ..labels import Labels


def own_model_fields(labels: Labels, prefix: str, policy: ModelPolicy) -> tuple[gr.Textbox, gr.Textbox]:
    """Two textboxes in a closed accordion; empty fields mean the preset's models."""
    with labels.make(gr.Accordion, label="ctl.own_models", open=False, visible=policy.own_models,
                     elem_id=f"{prefix}-own-models"):
        target = labels.make(gr.Textbox, "", label="ctl.target", info="ctl.target_info", max_lines=1,
                             elem_id=f"{prefix}-target")
        draft = labels.make(gr.Textbox, "", label="ctl.draft", info="ctl.draft_info", max_lines=1,
                            elem_id=f"{prefix}-draft")
        code = "ctl.remote_code_on" if policy.trust_remote_code else "ctl.remote_code_off"
        labels.make(gr.Markdown, text=code, elem_classes=["sdl-note"])
    return target, draft
