"""How the blocks look: one palette for the one status vocabulary, the inline CSS of the HTML
output, and escaping for HTML and Markdown.

The HTML uses inline CSS only (no external resource, no JavaScript), so it also shows in
static renderings (nbconvert, GitHub) and in the standalone report. Every string that comes
from the user or from torch goes through :func:`escape`.
"""

from __future__ import annotations

import html
import re
from typing import Any

from ..errors import Status

__all__ = [
    "BOX_CSS",
    "FONT_CSS",
    "HEADING_SIZE",
    "SCROLL_CSS",
    "TABLE_CSS",
    "TD_CSS",
    "TD_KV_CSS",
    "TH_CSS",
    "TH_KV_CSS",
    "TONES",
    "TONE_COLOR",
    "TONE_STYLE",
    "escape",
    "fence",
    "frame",
    "markdown_text",
    "status_word",
    "tone_of",
]

TONES = ("ok", "warn", "fail", "info", "muted")
TONE_STYLE = {
    "ok": "background:#dcfce7;color:#166534",
    "warn": "background:#fef3c7;color:#92400e",
    "fail": "background:#fee2e2;color:#991b1b",
    "info": "background:#dbeafe;color:#1e40af",
    "muted": "background:#f3f4f6;color:#374151",
}
TONE_COLOR = {"fail": "#991b1b", "warn": "#92400e", "ok": "#166534", "info": "#1e40af", "muted": "#374151"}
# One palette for the one vocabulary (exporter.errors.Status): each member's badge, its tone
# and the word it shows (a case's or verify's own word reads as the plain verdict it means).
_STATUS_BADGE = {
    Status.OK: ("ok", "ok"), Status.PASS: ("pass", "ok"), Status.PASSED: ("pass", "ok"),
    Status.FAILED: ("failed", "fail"), Status.ERROR: ("failed", "fail"), Status.FAIL: ("fail", "fail"),
    Status.ORT_ERROR: ("fail", "fail"), Status.SHAPE_MISMATCH: ("fail", "fail"),
    Status.DTYPE_MISMATCH: ("fail", "fail"), Status.MISSING: ("fail", "fail"), Status.MISMATCH: ("fail", "fail"),
    Status.NOT_VERIFIED: ("not_verified", "warn"), Status.WARNING: ("warning", "warn"),
    Status.CANCELLED: ("cancelled", "warn"), Status.RUNNING: ("running", "info"),
    Status.SKIPPED: ("skipped", "muted"), Status.EAGER_ERROR: ("skipped", "muted"), Status.NOT_RUN: ("not run", "muted"),
    Status.NOT_COMPARED: ("not compared", "muted"), Status.CHANGED: ("changed", "info"),
    Status.NO_CHANGE: ("no change", "muted"), Status.BROKEN: ("broken", "fail"),
}
# What became of a dim is not a status, but shows as a badge too.
_WORD_TONE = {"dynamic": "info", "static": "muted", "partial": "info"}


def _word(status: Any) -> str:
    """A status given as an enum member or as a word, as its word."""
    return str(status.value if hasattr(status, "value") else status)


def status_word(status: Any) -> str:
    """The word a status's badge shows (``"passed"`` → ``pass``); other words unchanged."""
    known = Status.of(status)
    return _STATUS_BADGE[known][0] if known is not None else _word(status)


def tone_of(status: Any) -> str:
    """The tone of a status word (``ok`` → ok, ``failed`` → fail, ``cancelled`` → warn...)."""
    known = Status.of(status)
    if known is not None:
        return _STATUS_BADGE[known][1]
    return _WORD_TONE.get(_word(status).lower(), "muted")


HEADING_SIZE = {2: "1.3em", 3: "1.1em", 4: "1em", 5: "0.95em", 6: "0.9em"}
TABLE_CSS = "border-collapse:collapse;margin:0;font-size:0.9em"
BOX_CSS = "background:#f8f8f8;border:1px solid #e5e7eb;padding:6px;margin:4px 0;max-width:100%;font-size:0.85em"
SCROLL_CSS = "overflow:auto;max-width:100%;max-height:32em;margin:4px 0"
TH_CSS = ("border-bottom:1px solid #9ca3af;padding:2px 8px;text-align:left;vertical-align:bottom;font-weight:600;"
          "white-space:nowrap;position:sticky;top:0;background:#fff")
TD_CSS = "border-bottom:1px solid #e5e7eb;padding:2px 8px;text-align:left;vertical-align:top;white-space:nowrap"
TH_KV_CSS = "padding:1px 1em 1px 0;text-align:left;vertical-align:top;font-weight:600;white-space:nowrap"
TD_KV_CSS = "padding:1px 0;text-align:left;vertical-align:top;overflow-wrap:anywhere"
FONT_CSS = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.4;color:#111827"


def escape(text: Any) -> str:
    """``text`` (any value, as ``str``) escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def markdown_text(text: Any) -> str:
    """Text for Markdown: characters that would start markup (``*``, `` ` ``, ``<``) escaped."""
    return re.sub(r"([\\`*<>])", r"\\\1", str(text))


def fence(text: str, language: str) -> str:
    """``text`` as a fenced Markdown code block (four backquotes when it holds three)."""
    ticks = "```" if "```" not in text else "````"
    return f"{ticks}{language}\n{text}\n{ticks}"


def frame(inner: str) -> str:
    """An HTML fragment in the container that sets the font and keeps it within its pane."""
    return f'<div class="oxw" style="{FONT_CSS};max-width:100%">{inner}</div>'
