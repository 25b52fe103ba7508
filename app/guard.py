"""Handlers never show a stack trace: a UserError becomes a message in the page (and a toast);
anything else is logged and shown as a short message."""
from __future__ import annotations

import functools
import inspect
import logging

import gradio as gr

from core import UserError

from .i18n import t

log = logging.getLogger("app")


def error_markdown(message: str, lang: str) -> str:
    return f'<div class="sdl-error">⚠️ {t("err.prefix", lang)}: {message}</div>'


def guarded(status):
    """Wrap a handler whose first argument is the page language and whose results are dicts
    keyed by component; errors are shown in the ``status`` Markdown."""

    def wrap(handler):
        @functools.wraps(handler)
        def run(lang, *args):
            try:
                result = handler(lang, *args)
                if inspect.isgenerator(result):
                    yield from result
                else:
                    yield result
            except UserError as e:
                gr.Warning(str(e), title=t("err.prefix", lang))
                yield {status: error_markdown(str(e), lang)}
            except Exception as e:  # an engine bug must not leave the page without a word
                log.exception("handler %s failed", handler.__name__)
                message = t("err.internal", lang, error=f"{type(e).__name__}: {e}")
                gr.Warning(message, title=t("err.prefix", lang))
                yield {status: error_markdown(message, lang)}

        return run

    return wrap
