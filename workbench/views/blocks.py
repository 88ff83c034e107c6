"""How the tabs put the core's display blocks (:mod:`exporter.display`) on screen.

Every table, key/value list, note and status badge in the widget is a block of the core's
presentation model rendered with ``.to_html()``; this module only adds what a ~570 px pane
needs around them: one stylesheet scoped to the widget (tables scroll inside the pane, cells
do not wrap into tall rows), a verdict line, folded details, a failure shown once, and
matplotlib charts scaled to the pane's width.

:func:`verdict`, :func:`folded` and :func:`failure_html` are the core's :class:`Verdict`,
:class:`Details` and :func:`failure_blocks` with a status badge, on markup the tabs built.
"""

from __future__ import annotations

import html
import io
import re
from typing import TYPE_CHECKING, Any, Union

from exporter.display import Badge, Block, Details, Note, Raw, Verdict, failure_blocks, failure_sentence
from exporter.errors import Failure, Status

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# What a pane holds: blocks, HTML this package built, or nothing.
Part = Union[Block, str, None]

__all__ = ["STYLE", "esc", "failure_html", "figure_html", "folded", "pane", "verdict"]

# Scoped to the widget; !important because the core's blocks carry inline styles meant for
# wide pages (reports), and a pane is narrow.
STYLE = """<style>
.wb-workbench .widget-html, .wb-workbench .widget-html-content { min-width: 0; max-width: 100%; }
.wb-workbench .widget-html-content { overflow-x: auto; }
.wb-workbench .wb-pane { max-width: 100%; overflow-x: auto; font-size: 13px; line-height: 1.4; }
.wb-workbench .wb-pane td, .wb-workbench .wb-pane th { white-space: nowrap; }
.wb-workbench .wb-pane pre { white-space: pre-wrap !important; overflow-wrap: anywhere; max-width: 100%; }
.wb-workbench .wb-pane p { overflow-wrap: anywhere; }
.wb-workbench .wb-pane details > summary { cursor: pointer; color: #374151; margin: 4px 0; }
.wb-workbench .wb-pane svg { max-width: 100%; height: auto; }
.wb-workbench .wb-verdict { margin: 2px 0 6px 0; overflow-wrap: anywhere; }
.wb-workbench .wb-verdict > p { display: inline; margin: 0 0 0 6px !important; }
.wb-workbench .wb-muted { color: #4b5563; }
.wb-workbench .wb-size { color: #666; }
.wb-workbench .wb-caution { color: #92400e; }
.wb-workbench .wb-error { color: #991b1b; }
.wb-workbench .wb-nowrap { white-space: nowrap; }
.wb-workbench .wb-wrap { overflow-wrap: anywhere; }
.wb-workbench code.wb-where, .wb-workbench pre.wb-guards { font-size: 85%; }
.wb-workbench pre.wb-guards { white-space: pre-wrap; }
.wb-workbench summary.wb-muted { cursor: pointer; }
.wb-workbench .wb-scroll { overflow: auto; max-height: 70vh; max-width: 100%; }
.wb-workbench .wb-graph-scroll { overflow: auto; max-height: 80vh; max-width: 100%; }
.wb-workbench .wb-pass-legend { margin: 4px 0; }
.wb-workbench .wb-swatch { padding: 0 6px; margin-right: 8px; border: 1px solid #999; }
.wb-workbench .widget-button:disabled, .wb-workbench .jupyter-button:disabled {
  background: var(--jp-layout-color3, #bdbdbd) !important; color: var(--jp-ui-font-color2, #616161) !important;
  cursor: default !important; opacity: 0.6; box-shadow: none !important; }
</style>"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _html_of(part: Part) -> str:
    if part is None:
        return ""
    if isinstance(part, str):
        return part
    return part.to_html()


def pane(*parts: Part) -> str:
    """Blocks (or HTML strings) as one fragment that never grows wider than its pane."""
    return f'<div class="wb-pane">{"".join(_html_of(p) for p in parts)}</div>'


def verdict(status: Status | str, text: str = "", tone: str | None = None) -> str:
    """The one line a tab starts with: a status badge and the core's :class:`Verdict` sentence
    (the number that matters)."""
    badge = Badge(str(status), tone) if tone else Badge.status(status)
    line = Verdict(text, badge.tone).to_html() if text else ""
    return f'<div class="wb-verdict">{badge.to_html()}{line}</div>'


def folded(summary: str, *parts: Part, open: bool = False) -> str:
    """Details folded under a one-line summary (click to open): the core's :class:`Details`,
    for blocks or markup this package built."""
    body = "".join(_html_of(p) for p in parts)
    if not body:
        return ""
    return Details(summary, (Raw(body),), open=open).to_html()


def failure_html(failure: Failure | str | None, what: str = "") -> str:
    """A failure shown once, as the core lays it out (:func:`exporter.display.failure_blocks`):
    its sentence in the user's terms as the verdict line, where it happened and the fix;
    torch's text and the traceback folded."""
    if failure is None:
        return ""
    head, *rest = failure_blocks(failure)
    sentence = head.text if isinstance(head, Note) else failure_sentence(failure)
    return pane(verdict("failed", f"{what}: {sentence}" if what else sentence), *rest)


_SIZE = re.compile(r'\s(width|height)="[^"]*"')


def figure_html(figure: Figure) -> str:
    """A matplotlib figure as inline SVG scaled to the pane's width (the figure is closed)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    start = text.find("<svg")
    if start < 0:
        return ""
    text = text[start:]
    head_end = text.find(">")
    head = _SIZE.sub("", text[:head_end])
    return ('<div class="wb-chart" style="max-width:100%">'
            + head + ' style="width:100%;height:auto;display:block"' + text[head_end:] + "</div>")
