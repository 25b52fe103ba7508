"""Handlers never show a stack trace: a UserError becomes a message in the page (and a toast);
anything else is logged and shown as a short message. Messages are shown as text: terminal
colour codes are dropped and any markup (a user's value quoted in a message) is escaped."""
from __future__ import annotations

import functools
import html
import inspect
import logging
import re

import gradio as gr

from core import UserError

from .i18n import DEFAULT_LANG, LANG_CHOICES, t
from .session import SessionsFull

LANGS = {code for _, code in LANG_CHOICES}

log = logging.getLogger("app")
ANSI_CODE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(message: str) -> str:
    """A message without terminal colour codes."""
    return ANSI_CODE.sub("", message)


def error_markdown(message: str, lang: str) -> str:
    """The message in an HTML block (Markdown is not read inside it): escaped, on one block."""
    text = html.escape(plain(message), quote=False).replace("\n", "<br>")
    return f'<div class="sdl-error">⚠️ {t("err.prefix", lang)}: {text}</div>'


def _warn(message: str, lang: str) -> None:
    gr.Warning(html.escape(plain(message), quote=False), title=t("err.prefix", lang))


def guarded(status):
    """Wrap a handler whose first argument is the page language and whose results are dicts
    keyed by component; errors are shown in the ``status`` Markdown."""

    def wrap(handler):
        @functools.wraps(handler)
        def run(lang, *args):
            try:
                if not isinstance(lang, str) or lang not in LANGS:
                    lang = DEFAULT_LANG
                    raise UserError(t("err.language", "en") + " · " + t("err.language", "zh"))
                result = handler(lang, *args)
                if inspect.isgenerator(result):
                    yield from result
                else:
                    yield result
            except UserError as e:
                message = e.message(lang) if isinstance(e, SessionsFull) else str(e)
                _warn(message, lang)
                yield {status: error_markdown(message, lang)}
            except Exception as e:  # an engine bug must not leave the page without a word
                log.exception("handler %s failed", handler.__name__)
                message = t("err.internal", lang, error=f"{type(e).__name__}: {e}")
                _warn(message, lang)
                yield {status: error_markdown(message, lang)}

        return run

    return wrap
