"""Components whose visible words follow the language toggle.

Each view registers a component with the i18n keys of its label, value, info or choices;
``updates(lang)`` returns one ``gr.update`` per component for the toggle's handler.
"""
from __future__ import annotations

import gradio as gr

from .i18n import t


class Labels:
    def __init__(self, lang: str):
        self.lang = lang  # the language the page is first built in
        self._entries: list[tuple[gr.components.Component, dict]] = []

    def __call__(self, component, **keys):
        """Register ``component``; ``keys`` maps an attribute (label, value, info) to an i18n key,
        or ``choices`` to a list of (i18n key, value) pairs. Returns the component."""
        self._entries.append((component, keys))
        return component

    def make(self, component_cls, *args, label: str | None = None, info: str | None = None,
             text: str | None = None, **kwargs):
        """Build and register ``component_cls(*args, **kwargs)`` whose ``label``, ``info`` and
        ``text`` (its value) are i18n keys: translated now and on every language switch, so each
        key is written once per component."""
        keys = {attr: key for attr, key in (("label", label), ("info", info), ("value", text)) if key is not None}
        return self(component_cls(*args, **kwargs, **{attr: self.text(key) for attr, key in keys.items()}), **keys)

    def text(self, key: str, **fields) -> str:
        """A text in the page's first language, for building components."""
        return t(key, self.lang, **fields)

    @property
    def components(self) -> list:
        return [component for component, _ in self._entries]

    def updates(self, lang: str, values: dict | None = None) -> dict:
        """One update per registered component in ``lang``; ``values`` (component -> new value)
        are folded in, so a component can get its new label and its new value at once."""
        values = dict(values or {})
        out = {}
        for component, keys in self._entries:
            change = {}
            for attr, key in keys.items():
                if attr == "choices":
                    change["choices"] = [(t(k, lang), v) for k, v in key]
                else:
                    change[attr] = t(key, lang)
            if component in values:
                value = values.pop(component)
                if isinstance(value, dict) and value.get("__type__") == "update":
                    change.update({k: v for k, v in value.items() if k != "__type__"})
                else:
                    change["value"] = value
            out[component] = gr.update(**change)
        return {**values, **out}
