"""Small HTML pieces the views share: escaped text, tables from the core's ``to_frame()``,
errors with their hint and source line, matplotlib figures as inline SVG. Every value is
escaped: model names, source lines and messages come from user code and torch."""

from __future__ import annotations

import html
import io
from typing import Any

STATUS_COLORS = {
    "ok": "#2ca02c", "passed": "#2ca02c", "pass": "#2ca02c",
    "failed": "#d62728", "error": "#d62728", "fail": "#d62728",
    "skipped": "#7f7f7f", "cancelled": "#ff7f0e", "running": "#1f77b4", "not run": "#7f7f7f",
}


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def pre(text: str, css_class: str = "") -> str:
    cls = f' class="{css_class}"' if css_class else ""
    return f'<pre{cls} style="white-space: pre-wrap; margin: 2px 0">{esc(text)}</pre>'


def badge(status: Any) -> str:
    word = str(getattr(status, "value", status))
    color = STATUS_COLORS.get(word, "#333")
    return f'<b style="color: {color}; white-space: nowrap">{esc(word)}</b>'


def note(text: str) -> str:
    return f'<span style="color: #666">{esc(text)}</span>'


def frame_html(frame: Any, max_rows: int = 200) -> str:
    """A pandas DataFrame as an escaped HTML table (no index)."""
    if frame is None or len(frame) == 0:
        return note("(none)")
    return frame.head(max_rows).to_html(index=False, escape=True, na_rep="", border=0, classes="wb-table")


def failure_html(failure: Any, title: str = "") -> str:
    """An :class:`exporter.errors.Failure` (or any error) as a red box: the message, the user's
    source line and the hint. Never a traceback wall: the traceback is folded away."""
    if failure is None:
        return ""
    stage = getattr(failure, "stage", "")
    message = getattr(failure, "message", None) or str(failure)
    kind = "" if isinstance(failure, str) else getattr(failure, "type", type(failure).__name__)
    parts = [f'<div class="wb-error" style="border-left: 4px solid #d62728; padding: 4px 8px; margin: 4px 0">',
             f"<b>{esc(title or f'{stage} failed')}</b>" + (f" <code>{esc(kind)}</code>" if kind else ""),
             pre(message)]
    source = getattr(failure, "source", None)
    if source:
        parts.append(f"<div>at <code>{esc(source)}</code></div>")
    hint = getattr(failure, "hint", None)
    if hint:
        parts.append(f"<div>fix: {pre(hint)}</div>")
    traceback = getattr(failure, "traceback", "")
    if traceback:
        parts.append(f"<details><summary>traceback</summary>{pre(traceback)}</details>")
    parts.append("</div>")
    return "".join(parts)


def figure_svg(figure: Any) -> str:
    """A matplotlib Figure as inline SVG markup (the figure is closed afterwards)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text
