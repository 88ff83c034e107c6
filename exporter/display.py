"""One presentation model for every result a session produces, with a text, an HTML and a
Markdown output.

Results are first lowered to a tiny tree of frozen blocks, which then render as plain text
(:meth:`Section.to_text`: ``summary()``, ``repr``), as an HTML fragment
(:meth:`Section.to_html`: ``_repr_html_``, the widget's tabs, the standalone report) or as
Markdown (:meth:`Section.to_markdown`: the CLI's ``summary.md``)::

    from exporter.display import render, to_html

    section = render(session.dims)      # a Section
    print(section.to_text())
    html = to_html(session.verify())     # what a notebook shows for the result

Blocks:

- :class:`Section`: a title, a status :class:`Badge`, an optional one-line :class:`Verdict`
  (verdict first: passed / failed / busy machine and the one number that matters), a body of
  blocks and sub-sections, an ``anchor`` for links.
- :class:`KeyValues` (``key: value`` lines), :class:`Table` (columns and rows of cells),
  :class:`Note` (a sentence, toned), :class:`Pre` (preformatted text), :class:`Code`
  (copy-able code: a fenced block in Markdown, ``<pre><code class="oxw-code">`` in HTML),
  :class:`Svg` (Graphviz's drawing), :class:`Verdict` (one line, toned),
  :class:`Details` (blocks folded under a one-line summary: ``<details>`` in HTML, indented
  text in text; ``in_text=False`` leaves them out of the text, e.g. a traceback).
- :class:`Document`: a standalone page of sections (:mod:`exporter.report`).

Tables are made for reading: numbers right-aligned at 3 significant digits (0 is ``0``),
missing values blank, short cells never wrap, long text is cut with the full text in a
``title`` tooltip and listed in a folded ``<details>`` below the table, the header is sticky,
and every table sits in a container that scrolls sideways inside its pane
(``overflow-x:auto; max-width:100%``). Status words come from one vocabulary
(:class:`exporter.errors.Status`) and one palette (:data:`TONES`).

Results do not import this module: it registers a builder per result type with
:func:`exporter.presentation.presents` (by qualified type name), and results inherit
:class:`exporter.presentation.Presentable` for ``summary()``/``repr``/``_repr_html_``.

The HTML uses inline CSS only (no external resource, no JavaScript), so it also shows in
static renderings (nbconvert, GitHub) and in the standalone report (:mod:`exporter.report`).
Every string that comes from the user or from torch is escaped with ``html.escape``; the only
markup passed through is Graphviz's SVG, after :func:`clean_svg`.

A renderer never raises: :func:`repr_html` turns an error while rendering into a box that
shows it. Nothing heavy (torch, onnx, pandas) is imported by this module.
"""

from __future__ import annotations

import html
import math
import re
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from .errors import Status, _export_error_names
from .presentation import lower, presents, set_html_renderer

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "Badge",
    "Block",
    "Code",
    "Details",
    "Document",
    "KeyValues",
    "Note",
    "Pre",
    "Section",
    "Svg",
    "Table",
    "Verdict",
    "attempts_table",
    "benchmark_section",
    "clean_svg",
    "comparison_section",
    "dims_section",
    "failure_blocks",
    "failure_section",
    "fixes_section",
    "guards_section",
    "mapping_section",
    "number",
    "passes_section",
    "profile_section",
    "render",
    "repr_html",
    "result_line",
    "session_html",
    "session_section",
    "stages_table",
    "status_word",
    "sweep_section",
    "to_html",
    "to_markdown",
    "tone_of",
    "user_terms",
    "verify_section",
]

# -- the model ----------------------------------------------------------------------------------

TONES = ("ok", "warn", "fail", "info", "muted")
_TONE_STYLE = {
    "ok": "background:#dcfce7;color:#166534",
    "warn": "background:#fef3c7;color:#92400e",
    "fail": "background:#fee2e2;color:#991b1b",
    "info": "background:#dbeafe;color:#1e40af",
    "muted": "background:#f3f4f6;color:#374151",
}
_TONE_COLOR = {"fail": "#991b1b", "warn": "#92400e", "ok": "#166534", "info": "#1e40af", "muted": "#374151"}
# One palette for the one vocabulary (exporter.errors.Status).
_STATUS_TONE = {
    Status.OK: "ok", Status.PASS: "ok",
    Status.FAILED: "fail", Status.FAIL: "fail",
    Status.WARNING: "warn", Status.CANCELLED: "warn",
    Status.RUNNING: "info",
    Status.SKIPPED: "muted", Status.NOT_RUN: "muted",
}
# What became of a dim is not a status, but shows as a badge too.
_WORD_TONE = {"dynamic": "info", "static": "muted", "partial": "info"}


def status_word(status: Any) -> str:
    """The vocabulary's word for a status (``"passed"`` → ``pass``); other words unchanged."""
    known = Status.of(status)
    return known.value if known is not None else str(getattr(status, "value", status))


def tone_of(status: Any) -> str:
    """The tone of a status word (``ok`` → ok, ``failed`` → fail, ``cancelled`` → warn...)."""
    known = Status.of(status)
    if known is not None:
        return _STATUS_TONE[known]
    return _WORD_TONE.get(str(getattr(status, "value", status)).lower(), "muted")


@dataclass(frozen=True)
class Badge:
    """A short status word with a tone (``ok``, ``warn``, ``fail``, ``info``, ``muted``)."""

    text: str
    tone: str = "muted"

    @classmethod
    def status(cls, status: Any) -> Badge:
        """The badge of a status, in the vocabulary's word and palette."""
        return cls(status_word(status), tone_of(status))

    def to_text(self) -> str:
        return f"[{self.text}]"

    def to_markdown(self) -> str:
        return f"`{self.text}`"

    def to_html(self) -> str:
        style = _TONE_STYLE.get(self.tone, _TONE_STYLE["muted"])
        return (f'<span class="oxw-badge oxw-{_e(self.tone)}" style="{style};border-radius:3px;'
                f'padding:0 5px;font-size:0.85em;font-weight:600;white-space:nowrap">{_e(self.text)}</span>')


Cell = Union[str, Badge]


@dataclass(frozen=True)
class Verdict:
    """The one line a section starts with: passed / failed / busy machine, and the number
    that matters."""

    text: str
    tone: str = "muted"

    def text_lines(self) -> list[str]:
        return [self.text]

    def to_markdown(self) -> str:
        return f"**{_md_text(self.text)}**"

    def to_html(self) -> str:
        return _paragraph("verdict", self.tone, self.text, "margin:2px 0 6px 0;font-weight:600")


def _paragraph(kind: str, tone: str, text: str, style: str) -> str:
    """A toned ``<p>`` (a verdict, a note)."""
    color = _TONE_COLOR.get(tone, _TONE_COLOR["muted"])
    return (f'<p class="oxw-{kind} oxw-{_e(tone)}" style="{style};color:{color};overflow-wrap:anywhere">'
            f'{_e(text)}</p>')


@dataclass(frozen=True)
class KeyValues:
    """``key: value`` lines."""

    items: tuple[tuple[str, Cell], ...]

    def text_lines(self) -> list[str]:
        width = max((len(k) for k, _ in self.items), default=0)
        return [f"{k + ':':<{width + 1}} {_cell_text(v)}".rstrip() for k, v in self.items]

    def to_markdown(self) -> str:
        return "\n".join(f"- **{_md_text(k)}**: {_cell_markdown(v)}" for k, v in self.items)

    def to_html(self) -> str:
        rows = "".join(
            f'<tr><th style="{_TH_KV}">{_e(k)}</th>'
            f'<td style="{_TD_KV}">{_cell_html(v)}</td></tr>'
            for k, v in self.items
        )
        return f'<table class="oxw-kv" style="{_TABLE};max-width:100%">{rows}</table>'


_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?\s*(x|%|ms|s|MB)?")
_LONG = 48  # characters a table cell shows before it is cut (the full text: tooltip and details)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.dtype.kind in "iuf"


def _numeric_text(text: str) -> bool:
    return bool(_NUMBER.fullmatch(text.strip())) or text.strip() in ("inf", "-inf")


@dataclass(frozen=True)
class Table:
    """Columns and rows of cells (strings or badges). ``align`` holds ``"r"`` for the
    columns of numbers (right-aligned), ``"l"`` otherwise; ``code`` names the columns that
    hold code (monospace in HTML, backquoted in Markdown)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""
    align: tuple[str, ...] = ()
    code: tuple[str, ...] = ()

    @classmethod
    def from_rows(cls, columns: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "",
                  badges: Sequence[str] = (), code: Sequence[str] = ()) -> Table:
        """Cells are formatted with :func:`cell`; columns named in ``badges`` show status
        badges; a column whose every value is a number is right-aligned."""
        columns = tuple(columns)
        as_badge = {columns.index(c) for c in badges if c in columns}
        raw = [tuple(row) for row in rows]
        out = []
        for row in raw:
            out.append(tuple(
                Badge.status(value) if i in as_badge and not _missing(value) else cell(value)
                for i, value in enumerate(row)
            ))
        align = []
        for i in range(len(columns)):
            values = [row[i] for row in raw if i < len(row) and not _missing(row[i]) and row[i] != ""]
            numeric = bool(values) and i not in as_badge and all(
                _is_number(v) or (isinstance(v, str) and _numeric_text(v)) for v in values)
            align.append("r" if numeric else "l")
        return cls(columns, tuple(out), caption, tuple(align), tuple(c for c in code if c in columns))

    @classmethod
    def from_frame(cls, frame: Any, columns: Sequence[str] | None = None, caption: str = "",
                   badges: Sequence[str] = ()) -> Table:
        """A table from a pandas DataFrame (all columns, or ``columns``)."""
        columns = list(columns) if columns is not None else [str(c) for c in frame.columns]
        rows = frame[columns].itertuples(index=False, name=None)
        return cls.from_rows(columns, rows, caption, badges)

    def _right(self, i: int) -> bool:
        return i < len(self.align) and self.align[i] == "r"

    def text_lines(self) -> list[str]:
        cells = [list(self.columns)] + [[_cell_text(c) for c in row] for row in self.rows]
        cells = [[c.replace("\n", " ") for c in row] for row in cells]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = [self.caption] if self.caption else []
        for row in cells:
            lines.append("  ".join(c.rjust(w) if self._right(i) else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        return lines

    def to_markdown(self) -> str:
        code = {self.columns.index(c) for c in self.code}

        def md(value: Cell, i: int) -> str:
            text = _cell_text(value).replace("\n", " ")
            if i in code and text:
                return "`" + text.replace("|", "\\|") + "`"  # GitHub tables need \| inside code too
            return _cell_markdown(value).replace("|", "\\|").replace("\n", " ")

        head = "| " + " | ".join(_md_text(c).replace("|", "\\|") for c in self.columns) + " |"
        rule = "|" + "|".join(" ---: " if self._right(i) else " --- " for i in range(len(self.columns))) + "|"
        rows = ["| " + " | ".join(md(c, i) for i, c in enumerate(row)) + " |" for row in self.rows]
        caption = [f"*{_md_text(self.caption)}*", ""] if self.caption else []
        return "\n".join(caption + [head, rule] + rows)

    def to_html(self) -> str:
        caption = (f'<caption style="text-align:left;font-weight:600;padding:2px 0">{_e(self.caption)}</caption>'
                   if self.caption else "")
        code = {self.columns.index(c) for c in self.code}
        head = "".join(f'<th style="{_TH}{";text-align:right" if self._right(i) else ""}">{_e(c)}</th>'
                       for i, c in enumerate(self.columns))
        long_texts: list[tuple[str, str, str]] = []
        body = []
        for row in self.rows:
            cells = []
            for i, value in enumerate(row):
                style = _TD + (";text-align:right;font-variant-numeric:tabular-nums" if self._right(i) else "")
                if isinstance(value, Badge) or len(value) <= _LONG:
                    inner = _cell_html(value)
                    inner = f"<code>{inner}</code>" if i in code and inner else inner
                    cells.append(f'<td style="{style}">{inner}</td>')
                    continue
                short = value[: _LONG - 1].rstrip() + "…"
                inner = f"<code>{_e(short)}</code>" if i in code else _e(short)
                cells.append(f'<td style="{style}" title="{_e(value)}">{inner}</td>')
                label = _cell_text(row[0]) if i else ""
                long_texts.append((label, self.columns[i] if i < len(self.columns) else "", value))
            body.append("<tr>" + "".join(cells) + "</tr>")
        table = (f'<table class="oxw-table" style="{_TABLE}">{caption}<thead><tr>{head}</tr></thead>'
                 f'<tbody>{"".join(body)}</tbody></table>')
        parts = [f'<div class="oxw-scroll" style="{_SCROLL}">{table}</div>']
        if long_texts:
            items = "".join(
                f'<li><b>{_e(label)}</b>{" " if label else ""}<i>{_e(column)}</i>: '
                f'<span style="white-space:pre-wrap;overflow-wrap:anywhere">{_e(text)}</span></li>'
                for label, column, text in long_texts)
            parts.append(Details(f"full text ({len(long_texts)} cut cell{'s' if len(long_texts) != 1 else ''})",
                                 (_Raw(f'<ul style="margin:2px 0;padding-left:1.2em">{items}</ul>'),)).to_html())
        return "".join(parts)


class _Lines:
    """A block whose text form is its ``text``, line by line."""

    text: str

    def text_lines(self) -> list[str]:
        return self.text.splitlines() or [""]


@dataclass(frozen=True)
class Pre(_Lines):
    """Preformatted text (an error, a traceback, a log)."""

    text: str

    def to_markdown(self) -> str:
        return _fence(self.text, "text")

    def to_html(self) -> str:
        return f'<pre class="oxw-pre" style="{_BOX};white-space:pre-wrap;overflow-wrap:anywhere">{_e(self.text)}</pre>'


@dataclass(frozen=True)
class Code(_Lines):
    """Code to copy (a dim spec, a fix): a fenced block in Markdown, monospace in HTML."""

    text: str
    language: str = "python"

    def to_markdown(self) -> str:
        return _fence(self.text, self.language)

    def to_html(self) -> str:
        return (f'<pre class="oxw-code-block" style="{_BOX};overflow-x:auto">'
                f'<code class="oxw-code language-{_e(self.language)}">{_e(self.text)}</code></pre>')


@dataclass(frozen=True)
class Note(_Lines):
    """A sentence, optionally toned (a warning, a failure)."""

    text: str
    tone: str = "muted"

    def to_markdown(self) -> str:
        text = _md_text(self.text).replace("\n", "  \n")
        return f"**{text}**" if self.tone in ("fail", "warn") else text

    def to_html(self) -> str:
        return _paragraph("note", self.tone, self.text, "margin:4px 0;white-space:pre-wrap")


@dataclass(frozen=True)
class Svg:
    """An SVG drawing made by Graphviz (text form: a placeholder line). Cleaned on output."""

    svg: str
    alt: str = "graph drawing"

    def text_lines(self) -> list[str]:
        return [f"({self.alt}: SVG, {len(self.svg)} characters)"]

    def to_markdown(self) -> str:
        return f"*({_md_text(self.alt)}: an SVG drawing, shown in the HTML report)*"

    def to_html(self) -> str:
        cleaned = clean_svg(self.svg)
        if cleaned is None:
            return Note(f"{self.alt} left out: it contained active content", "warn").to_html()
        return (f'<div class="oxw-svg" style="overflow:auto;max-width:100%;max-height:80vh;'
                f'border:1px solid #e5e7eb">{cleaned}</div>')


@dataclass(frozen=True)
class _Raw:
    """Markup this module built itself (escaped already); never user text."""

    markup: str

    def text_lines(self) -> list[str]:
        return []

    def to_markdown(self) -> str:
        return ""

    def to_html(self) -> str:
        return self.markup


@dataclass(frozen=True)
class Details:
    """Blocks folded under a one-line summary: ``<details>`` in HTML; in text, the summary
    and the blocks indented below it (or nothing, with ``in_text=False``)."""

    summary: str
    body: tuple[Block, ...] = ()
    open: bool = False
    in_text: bool = True

    def text_lines(self) -> list[str]:
        if not self.in_text or not self.body:
            return []
        lines = [f"{self.summary}:"]
        for block in self.body:
            lines.extend(("  " + line).rstrip() for line in block.text_lines())
        return lines

    def to_markdown(self) -> str:
        if not self.in_text or not self.body:
            return ""
        return "\n\n".join([f"*{_md_text(self.summary)}*"] + [b.to_markdown() for b in self.body if b.to_markdown()])

    def to_html(self) -> str:
        if not self.body:
            return ""
        inner = "".join(b.to_html() for b in self.body)
        return (f'<details class="oxw-details"{" open" if self.open else ""} style="margin:4px 0">'
                f'<summary style="cursor:pointer;color:#374151">{_e(self.summary)}</summary>{inner}</details>')


@dataclass(frozen=True)
class Section:
    """A titled part with an optional status badge and one-line verdict; its body holds
    blocks and sub-sections."""

    title: str
    badge: Badge | None = None
    body: tuple[Block, ...] = ()
    anchor: str = ""
    verdict: Verdict | None = None

    def text_lines(self) -> list[str]:
        head = self.title + (f" {self.badge.to_text()}" if self.badge else "")
        lines = [head]
        blocks = ((self.verdict,) if self.verdict else ()) + tuple(self.body)
        for block in blocks:
            lines.extend(("  " + line).rstrip() for line in block.text_lines())
        return lines

    def to_text(self) -> str:
        return "\n".join(self.text_lines())

    def to_markdown(self, level: int = 2) -> str:
        hashes = "#" * max(1, min(level, 6))
        badge = f" {self.badge.to_markdown()}" if self.badge else ""
        parts = [f"{hashes} {_md_text(self.title)}{badge}"]
        if self.verdict:
            parts.append(self.verdict.to_markdown())
        for block in self.body:
            text = block.to_markdown(level + 1) if isinstance(block, Section) else block.to_markdown()
            if text:
                parts.append(text)
        return "\n\n".join(parts)

    def to_html(self, level: int = 3) -> str:
        badge = " " + self.badge.to_html() if self.badge else ""
        anchor = f' id="{_e(self.anchor)}"' if self.anchor else ""
        parts = [self.verdict.to_html()] if self.verdict else []
        for block in self.body:
            parts.append(block.to_html(min(level + 1, 6)) if isinstance(block, Section) else block.to_html())
        return (f'<section class="oxw-section"{anchor} style="margin:6px 0 10px 0;max-width:100%">'
                f'<h{level} style="margin:4px 0;font-size:{_HEADING_SIZE.get(level, "1em")}">{_e(self.title)}{badge}</h{level}>'
                f'<div style="margin-left:0.75em">{"".join(parts)}</div></section>')

    def _repr_html_(self) -> str:
        return _frame(self.to_html())

    def __str__(self) -> str:
        return self.to_text()


Block = Union[KeyValues, Table, Pre, Code, Note, Svg, Verdict, Details, Section]

_HEADING_SIZE = {2: "1.3em", 3: "1.1em", 4: "1em", 5: "0.95em", 6: "0.9em"}
_TABLE = "border-collapse:collapse;margin:0;font-size:0.9em"
_BOX = "background:#f8f8f8;border:1px solid #e5e7eb;padding:6px;margin:4px 0;max-width:100%;font-size:0.85em"
_SCROLL = "overflow:auto;max-width:100%;max-height:32em;margin:4px 0"
_TH = ("border-bottom:1px solid #9ca3af;padding:2px 8px;text-align:left;vertical-align:bottom;font-weight:600;"
       "white-space:nowrap;position:sticky;top:0;background:#fff")
_TD = "border-bottom:1px solid #e5e7eb;padding:2px 8px;text-align:left;vertical-align:top;white-space:nowrap"
_TH_KV = "padding:1px 1em 1px 0;text-align:left;vertical-align:top;font-weight:600;white-space:nowrap"
_TD_KV = "padding:1px 0;text-align:left;vertical-align:top;overflow-wrap:anywhere"
_FONT = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.4;color:#111827"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _md_text(text: Any) -> str:
    """Text for Markdown: characters that would start markup (``*``, `` ` ``, ``<``) escaped."""
    return re.sub(r"([\\`*<>])", r"\\\1", str(text))


def _fence(text: str, language: str) -> str:
    ticks = "```" if "```" not in text else "````"
    return f"{ticks}{language}\n{text}\n{ticks}"


def _missing(value: Any) -> bool:
    if value is None or type(value).__name__ in ("NAType", "NaTType"):  # pandas' missing values
        return True
    try:
        return isinstance(value, float) and math.isnan(value)
    except TypeError:  # pragma: no cover
        return False


def number(value: float) -> str:
    """A number as a person reads it: 3 significant digits without trailing zeros, ``0`` for
    zero, whole numbers whole, scientific notation only below 0.001 or from a million
    (``1.5e-08``)."""
    if value == 0:
        return "0"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    size = abs(value)
    if 1e-3 <= size < 1e6:
        digits = max(0, 2 - math.floor(math.log10(size)))
        text = f"{value:.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{value:.3g}"


def cell(value: Any) -> str:
    """How a value shows in a table cell: '' for None/NaN, 3 significant digits for floats
    (:func:`number`), yes/no for booleans, comma-joined sequences, ``str`` otherwise."""
    if _missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value)
    if hasattr(value, "item") and callable(value.item) and type(value).__module__ == "numpy":
        return cell(value.item())
    if isinstance(value, Status):
        return value.value
    return str(value)


def _cell_text(value: Cell) -> str:
    return value.text if isinstance(value, Badge) else value


def _cell_markdown(value: Cell) -> str:
    return value.text if isinstance(value, Badge) else _md_text(value)


def _cell_html(value: Cell) -> str:
    return value.to_html() if isinstance(value, Badge) else _e(value)


def _frame(inner: str) -> str:
    return f'<div class="oxw" style="{_FONT};max-width:100%">{inner}</div>'


_SVG_ACTIVE = re.compile(
    r"<\s*(script|foreignObject|iframe|object|embed)\b|\son\w+\s*=|javascript:"
    r"|(?:xlink:)?href\s*=\s*[\"']?\s*(?:https?:)?//|url\(\s*[\"']?\s*(?:https?:)?//|@import",
    re.IGNORECASE,
)


def clean_svg(svg: str) -> str | None:
    """Graphviz's SVG ready to inline in HTML: without the XML prolog, doctype and comments;
    None if it holds active or external content (scripts, event handlers, remote links)."""
    start = svg.find("<svg")
    if start < 0:
        return None
    body = re.sub(r"<!--.*?-->", "", svg[start:], flags=re.DOTALL)
    return None if _SVG_ACTIVE.search(body) else body


# -- builders: results → sections ---------------------------------------------------------------

_TORCH_SIZE = re.compile(r"L\['([^']+)'\]((?:\[[^\]]+\])*)\.size\(\)\[(\d+)\]")
_TORCH_INPUT = re.compile(r"L\['([^']+)'\]")


def user_terms(text: str) -> str:
    """torch's names for inputs as the user writes them: ``L['x'].size()[1]`` → ``x.shape[1]``,
    ``L['x']`` → ``x``."""
    text = _TORCH_SIZE.sub(lambda m: f"{m.group(1)}{m.group(2)}.shape[{m.group(3)}]", text)
    return _TORCH_INPUT.sub(lambda m: m.group(1), text)


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def failure_sentence(failure: Any) -> str:
    """A :class:`~exporter.errors.Failure` in one sentence, in the user's terms."""
    if isinstance(failure, str):
        return user_terms(_first_line(failure))
    line = _first_line(failure.message)
    if failure.type not in _export_error_names():
        line = f"{failure.type}: {line}" if line else failure.type
    return user_terms(line)


def failure_blocks(failure: Any, fallback: str | None = None) -> list[Block]:
    """A failure as a person reads it: one sentence in the user's terms, the user's source
    line, the fix; torch's own text ("torch said") and the traceback folded."""
    if failure is None:
        return [Note(user_terms(fallback), "fail")] if fallback else []
    if isinstance(failure, str):
        blocks: list[Block] = [Note(failure_sentence(failure), "fail")]
        rest = failure.strip()
        if rest != _first_line(rest):
            blocks.append(Details("torch said", (Pre(rest),), in_text=False))
        return blocks
    blocks = [Note(failure_sentence(failure), "fail")]
    if failure.source:
        blocks.append(KeyValues((("at", failure.source),)))
    if failure.hint:
        hint = failure.hint.strip()
        if "\n" in hint:
            head, _, code = hint.partition("\n")
            blocks.append(KeyValues((("fix", head),)))
            blocks.append(Code(code))
        else:
            blocks.append(KeyValues((("fix", hint),)))
    message = failure.message.strip()
    said = getattr(failure, "library_text", "") or (message if message != _first_line(message) else "")
    if said:
        blocks.append(Details("torch said", (Pre(said),), in_text=False))
    if failure.traceback:
        blocks.append(Details("traceback", (Pre(failure.traceback),), in_text=False))
    return blocks


@presents("exporter.errors.Failure")
def failure_section(failure: Any, title: str | None = None) -> Section:
    """A failure on its own: ``<stage> failed`` and :func:`failure_blocks`."""
    return Section(title or f"{failure.stage} failed", Badge.status(Status.FAILED), tuple(failure_blocks(failure)))


_failure_blocks = failure_blocks  # the name the benchmark builders below use


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def stages_table(stages: Sequence[Any]) -> Table:
    """One row per stage: status, seconds, cached, what it did. A failed stage's row says
    only the error's type: the failure itself is shown once, below the table."""
    rows = []
    for r in stages:
        d = r.to_dict()
        detail = r.failure.type if r.failure is not None else user_terms(d["detail"])
        rows.append((d["stage"], d["status"], _seconds(r.seconds), d["cached"], detail))
    return Table.from_rows(("stage", "status", "seconds", "cached", "detail"), rows, badges=("status",))


def _session_status(session: Session) -> Badge:
    stages = session.stages
    if any(r.status == Status.FAILED for r in stages):
        return Badge.status(Status.FAILED)
    if any(r.status == Status.CANCELLED for r in stages):
        return Badge.status(Status.CANCELLED)
    if session.succeeded:
        return Badge.status(Status.OK)
    return Badge.status(Status.NOT_RUN) if not stages else Badge("partial", "info")


def _session_verdict(session: Session) -> Verdict | None:
    failed = session.failed_stage
    if failed is not None:
        sentence = failure_sentence(failed.failure) if failed.failure is not None else failed.detail
        return Verdict(f"{failed.name} failed: {sentence}", "fail")
    stages = session.stages
    if not stages:
        return None
    total = sum(r.seconds for r in stages)
    strategy = next((r.strategy for r in stages if r.name == "capture" and r.strategy), None)
    by = f" ({strategy})" if strategy else ""
    if session.succeeded:
        return Verdict(f"exported in {number(total)} s{by}", "ok")
    if any(r.status == Status.CANCELLED for r in stages):
        return Verdict("cancelled", "warn")
    return Verdict(f"{', '.join(r.name for r in stages)} done in {number(total)} s{by}", "info")


@presents("exporter.session.Session")
def session_section(session: Session, *, title: str | None = None, details: bool | None = None) -> Section:
    """The compact summary of a :class:`~exporter.Session`: model, dim spec, options, one row
    per stage run so far, the failure if any, what has not run. Nothing is run to show it.

    ``details``: also show dims and guards (True: computed if needed; None: only when the
    session has already computed them)."""
    from .session import STAGES

    model = type(session.model).__name__
    options = session.options
    items: list[tuple[str, Cell]] = [
        ("model", model),
        ("dims", session.spec.describe()),
        ("strategy", str(options.strategy)),
    ]
    captured = next((r.strategy for r in session.stages if r.name == "capture" and r.strategy), None)
    if captured:
        items.append(("captured by", captured))
    extras = [f"opset {options.opset_version}" if options.opset_version else "",
              "runtime asserts" if options.runtime_asserts else "",
              "not optimized" if not options.optimize else "",
              f"fully masked rows: {options.fully_masked_rows}" if options.fully_masked_rows != "zero" else ""]
    if any(extras):
        items.append(("options", ", ".join(e for e in extras if e)))
    body: list[Block] = [KeyValues(tuple(items))]
    stages = session.stages
    if stages:
        body.append(stages_table(stages))
    failed = session.failed_stage
    if failed is not None:
        body.extend(b for b in failure_blocks(failed.failure, failed.detail)
                    if not isinstance(b, Note) or b.tone != "fail")  # the sentence is the verdict
    pending = [s for s in STAGES if s not in {r.name for r in stages}]
    if pending:
        body.append(Note(f"not run: {', '.join(pending)}"))
    analyses = _analyses_table(session)
    if analyses is not None:
        body.append(analyses)
    computed = vars(session)
    for name, builder in (("dims", dims_section), ("guards", guards_section)):
        if details or (details is None and name in computed):
            body.append(_safe(builder, getattr(session, name), name.capitalize()))
    return Section(title or f"Session: {model}", _session_status(session), tuple(body),
                   verdict=_session_verdict(session))


def result_line(result: Any) -> str:
    """The one line of an analysis result: its verdict (verify), headline (benchmark), or the
    verdict of its section."""
    line = getattr(result, "verdict", None) or getattr(result, "headline", None)
    if isinstance(line, str) and line:
        return line
    section = render(result)
    return section.verdict.text if section.verdict else _cell_text(section.badge) if section.badge else section.title


def _analyses_table(session: Session) -> Table | None:
    try:
        analyses = session.analyses
    except Exception:  # noqa: BLE001 - a summary shows what it can
        return None
    if not analyses:
        return None
    rows = [(name, getattr(result, "status", None), result_line(result)) for name, result in analyses.items()]
    return Table.from_rows(("analysis", "status", "result"), rows, badges=("status",))


def session_html(session: Session) -> str:
    """The HTML a notebook shows for a session (``Session._repr_html_``); never raises."""
    return repr_html(session)


def attempts_table(attempts: Sequence[Any]) -> Table:
    """One row per capture strategy tried: outcome, seconds, the first line of its error."""
    rows = [(a.strategy, a.outcome, _seconds(a.seconds), user_terms(a.first_error_line or "")) for a in attempts]
    return Table.from_rows(("strategy", "outcome", "seconds", "error"), rows, badges=("outcome",))


@presents("exporter.shapes.outcomes.DimOutcomes")
def dims_section(dims: Any, title: str = "Dims") -> Section:
    """Per input axis: example size, requested policy, obtained result and range, and why.
    When capture failed, only the axes the failure names read ``failed``."""
    badge = Badge.status(Status.FAILED) if dims.error else Badge(str(dims.strategy or "not captured"), "muted")
    rows = []
    for o in dims.outcomes:
        why = "; ".join(x for x in (user_terms(o.reason), f"note: {o.note}" if o.note else "") if x)
        rows.append((o.name, o.example, o.requested, o.obtained, o.range_text, o.dim or "", why, o.source))
    verdict = None
    if dims.error:
        failing = [o.name for o in dims.outcomes if o.obtained == "failed" and o.reason]
        said = (f"{', '.join(failing)} cannot be as requested (why: below)" if failing
                else user_terms(_first_line(str(dims.error))))
        verdict = Verdict(f"capture failed: {said}", "fail")
    else:
        dynamic = sum(1 for o in dims.outcomes if o.dynamic)
        differ = len(dims.differing)
        verdict = Verdict(f"{dynamic} dynamic axis(es) of {len(dims.outcomes)}"
                          + (f"; {differ} not as requested" if differ else ""), "warn" if differ else "ok")
    table = Table.from_rows(("axis", "example", "requested", "obtained", "range", "dim", "why", "source"),
                            rows, badges=("obtained",), code=("source",))
    body: list[Block] = [table]
    if any(o.dynamic and not o.min for o in dims.outcomes):
        from .shapes.outcomes import ZERO_MIN_NOTE

        body.append(Details("why ranges start at 1", (Note(ZERO_MIN_NOTE),), in_text=False))
    return Section(title, badge, tuple(body), verdict=verdict)


@presents("exporter.guards.Guards")
def guards_section(guards: Any, title: str = "Guards") -> Section:
    """Every shape guard with the user's line that added it."""
    records = tuple(guards)
    badge = Badge(f"{len(records)} guard{'s' if len(records) != 1 else ''}", "info" if records else "muted")
    if not records:
        return Section(title, badge, (Note(f"no shape guards ({guards.strategy or 'not captured'})"),))
    rows = [(g.kind, g.expression, ", ".join(a.dotted for a in g.axes), g.location, g.code) for g in records]
    return Section(title, badge, (Table.from_rows(("kind", "expression", "axes", "at", "code"), rows,
                                                  code=("expression", "code")),))


@presents("exporter.shapes.fixes.SuggestedFixes")
def fixes_section(fixes: Any, title: str = "Suggested fixes") -> Section:
    """torch's suggested fixes: the lines applied, those that name no dim of the spec, the
    spec before and after."""
    count = len(fixes.fixes)
    if not fixes.fixes and not fixes.unapplied:
        return Section(title, Badge("none", "muted"), (Note("no suggested fixes"),))
    body: list[Block] = []
    if fixes.fixes:
        body.append(Code("\n".join(f.text for f in fixes.fixes)))
    body.extend(Note(f"{u}  (not applied: names no dim of this spec)", "warn") for u in fixes.unapplied)
    if fixes.error:
        body.append(Note(f"could not apply: {fixes.error}", "fail"))
    if fixes.diff:
        body.append(Details("the spec before and after", (Pre(fixes.diff),)))
    return Section(title, Badge(f"{count} fix{'es' if count != 1 else ''}", "info"), tuple(body))


def _verify_tone(result: Any) -> str:
    return tone_of(result.status)


@presents("exporter.verify.results.VerifyResult")
def verify_section(result: Any, title: str = "Verification") -> Section:
    """Verification: the verdict line first, findings and contract problems, the first
    divergence; one row per case and the dim groups folded below."""
    badge = Badge.status(result.status)
    verdict = Verdict(getattr(result, "verdict", "") or str(result.status), _verify_tone(result))
    if Status.of(result.status) == Status.FAILED and not result.cases:
        blocks = failure_blocks(result.failure, result.error)
        if result.failure is None:  # the verdict already says what the fallback note would
            blocks = [b for b in blocks if not isinstance(b, Note)]
        return Section(title, badge, tuple(blocks), verdict=verdict)
    body: list[Block] = []
    if result.findings:
        if any(getattr(f, "fix", None) for f in result.findings):
            body.append(Table.from_rows(("finding", "message", "likely cause", "fix"),
                                        [(f.kind, f.message, f.cause, f.fix) for f in result.findings]))
        else:
            body.append(Table.from_rows(("finding", "message", "likely cause"),
                                        [(f.kind, f.message, f.cause) for f in result.findings]))
    if result.divergence is not None:
        body.append(Pre(result.divergence.summary()))
    if result.contract is not None and not result.contract.ok:
        body.append(Table.from_rows(
            ("check", "subject", "status", "message", "fix"),
            [(c.check, c.subject, c.status, c.message, c.hint) for c in result.contract.checks
             if Status.of(c.status) not in (Status.OK, Status.PASS)],
            caption="contract", badges=("status",)))
    rows = [(c.name, c.sizes_text, c.status, c.max_abs, ", ".join(c.outside_obtained),
             "" if c.ok else c.describe()) for c in result.cases]
    cases = Table.from_rows(("case", "sizes", "status", "max abs diff", "outside obtained range", "detail"),
                            rows, badges=("status",))
    body.append(Details(f"{len(result.cases)} case(s), {number(result.seconds)} s", (cases,),
                        open=not result.ok))
    if result.groups:
        groups = Table.from_rows(("dim", "axes", "sizes checked"),
                                 [(g.label, g.axes_text, ", ".join(map(str, g.sizes))) for g in result.groups])
        body.append(Details(f"{len(result.groups)} dim group(s)", (groups,)))
    return Section(title, badge, tuple(body), verdict=verdict)


@presents("exporter.bench.profiling.ProfileResult")
def profile_section(result: Any, title: str = "Profile", top: int = 5) -> Section:
    """onnxruntime's kernel time per run, by op type and by module (the ``top`` largest)."""
    badge = Badge.status(result.status)
    if result.cancelled:
        return Section(title, badge, (), verdict=Verdict("profile cancelled", "warn"))
    if result.error:
        return Section(title, badge, tuple(failure_blocks(result.failure, result.error)),
                       verdict=Verdict("profile could not run", "fail"))
    per_run = result.total_us / max(result.runs, 1)
    verdict = Verdict(f"{number(per_run)} µs of kernels per run over {result.runs} run(s)", "ok")
    body: list[Block] = []
    for by, label in (("op_type", "by op type"), ("module", "by module")):
        frame = result.to_frame(by).head(top)
        rows = [(row[by], row["nodes"], row["us_per_run"], f"{row['share']:.0%}") for _, row in frame.iterrows()]
        body.append(Table.from_rows((by.replace("_", " "), "nodes", "µs per run", "share"), rows, caption=label))
    return Section(title, badge, tuple(body), verdict=verdict)


@presents("exporter.graphs.mapping.NodeMapping")
def mapping_section(mapping: Any, title: str = "Node mapping") -> Section:
    """How the optimized ONNX nodes map to FX nodes: the one-line summary, then the
    nodes of each origin (counts)."""
    counts: dict[str, int] = {}
    for entry in mapping.entries:
        counts[entry.origin] = counts.get(entry.origin, 0) + 1
    table = Table.from_rows(("origin", "ONNX nodes"), sorted(counts.items()))
    return Section(title, Badge(f"coverage {mapping.coverage:.0%}", "info"), (table,),
                   verdict=Verdict(mapping.summary(), "muted"))


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.4g}"


def _bench_tone(result: Any) -> str:
    """ok for a steady figure on a quiet machine, warn for a range or a warning, fail otherwise."""
    if result.status != "ok":
        return tone_of(result.status)
    points = getattr(result, "points", None) or (result,)
    steady = all(getattr(p, "spread", None) is None for p in points)
    return "ok" if steady and not getattr(result, "warning", None) else "warn"


def benchmark_section(result: Any, title: str = "Benchmark") -> Section:
    """Latency of onnxruntime and eager PyTorch: the headline as the verdict, then the figures it
    is made of (each round's p10 and p50 call, median over rounds: the same statistic), the
    median call's ratio as the second figure, and the tail over all calls."""
    from .bench.headline import speed_text, times
    from .bench.rounds import LOW_QUANTILE

    badge = Badge.status(result.status)
    verdict = Verdict(result.headline, _bench_tone(result))
    if result.cancelled:
        return Section(title, badge, (Note("benchmark cancelled", "warn"),), verdict=verdict)
    if result.error:
        return Section(title, badge, tuple([Note("benchmark could not run", "fail"),
                                            *_failure_blocks(result.failure, result.error)]), verdict=verdict)
    items: list[tuple[str, Cell]] = []
    if result.sizes:
        items.append(("sizes", ", ".join(f"{k}={v}" for k, v in result.sizes)))
    if result.config is not None:
        items.append(("setup", result.config.describe()))
    if getattr(result, "threads_note", None):
        items.append(("threads", result.threads_note))
    items.append(("statistic", result.statistic))
    if result.speedup_p50 is not None:
        interval = result.speedup_p50_ci
        items.append(("median call", speed_text(result.speedup_p50) + " (p50 ratio"
                      + (f", 95% interval {times(interval[0])}–{times(interval[1])})" if interval else ")")))
    rows = []
    for timing in (result.ort, result.eager):
        if timing is None:
            continue
        s = timing.stats
        if s is None:
            rows.append((timing.engine, "", "", "", "", "", timing.error))
        else:
            rounds = timing.rounds.rounds if timing.rounds is not None else ""
            rows.append((timing.engine, str(s.runs), str(rounds), _ms(timing.low), _ms(timing.p50), _ms(s.p99), ""))
    body: list[Block] = [KeyValues(tuple(items))] if items else []
    body.append(Table.from_rows(("engine", "calls", "rounds", f"p{LOW_QUANTILE} ms", "p50 ms", "p99 ms (all calls)",
                                 "error"), rows))
    if getattr(result, "warning", None):
        body.insert(0, Note(result.warning, "warn"))
    if getattr(result, "comparison", None) is not None:
        body.append(Pre(result.comparison.summary()))
    return Section(title, badge, tuple(body), verdict=verdict)


def sweep_section(result: Any, title: str | None = None) -> Section:
    """Latency against the size of one dynamic dim: one row per size."""
    from .bench.headline import statistic, times
    from .bench.rounds import LOW_QUANTILE

    title = title or f"Latency vs {result.dim}"
    badge = Badge.status(result.status)
    verdict = Verdict(result.headline, _bench_tone(result))
    body: list[Block] = []
    if result.cancelled:
        body.append(Note(f"cancelled after {len(result.points)} size(s)", "warn"))
    if result.error:
        return Section(title, badge, (Note(f"sweep could not run: {result.error}", "fail"),), verdict=verdict)
    items: list[tuple[str, Cell]] = []
    if result.config is not None:
        items.append(("setup", result.config.describe()))
    if getattr(result, "threads_note", None):
        items.append(("threads", result.threads_note))
    items.append(("statistic", statistic(None)))
    body.append(KeyValues(tuple(items)))
    rows = []
    for size, point in zip(result.sizes, result.points):
        ort = point.ort if point.ort is not None and point.ort.ok else None
        eager = point.eager if point.eager is not None and point.eager.ok else None
        error = point.error or (point.ort.error if point.ort else None) or (point.eager.error if point.eager else None)
        if getattr(point, "spread", None) is not None:
            speed = f"{times(point.spread.low)}–{times(point.spread.high)} (rounds disagree)"
        else:
            speed = times(point.speedup) if point.speedup else ""
        rows.append((size, _ms(ort.low if ort else None), _ms(ort.p50 if ort else None),
                     _ms(eager.low if eager else None), _ms(eager.p50 if eager else None), speed,
                     f"{point.speedup_ci[0]:.2f}–{point.speedup_ci[1]:.2f}x" if getattr(point, "speedup_ci", None) else "",
                     error))
    low = f"p{LOW_QUANTILE}"
    body.append(Table.from_rows(("size", f"ort {low} ms", "ort p50 ms", f"eager {low} ms", "eager p50 ms", "speedup",
                                 "95% interval", "error"), rows))
    if getattr(result, "warning", None):
        body.append(Note(result.warning, "warn"))
    return Section(title, badge, tuple(body), verdict=verdict)


def comparison_section(result: Any, title: str = "Variants") -> Section:
    """Variants timed in the same rounds (``session.compare()``): one row per variant with its
    p50 and its time relative to the baseline."""
    from .bench.rounds import LOW_QUANTILE

    badge = Badge.status(result.status)
    if result.cancelled or result.error:
        text = "cancelled" if result.cancelled else f"comparison could not run: {result.error}"
        return Section(title, badge, (Note(text, "warn" if result.cancelled else "fail"),))
    rows = []
    for row in result.rows:
        if row.name == result.baseline:
            ratio = "baseline"
        elif row.ratio is not None and row.ratio_ci is not None:
            ratio = f"{row.ratio:.3f} ({row.ratio_ci[0]:.3f}–{row.ratio_ci[1]:.3f})"
        else:
            ratio = ""
        rows.append((row.name, _ms(getattr(row, "low", None)), _ms(getattr(row, "p50", None)), ratio,
                     "" if row.model_mb is None else f"{row.model_mb:.3g}",
                     "" if row.rss_growth_mb is None else f"{row.rss_growth_mb:.3g}", row.error))
    low = f"p{LOW_QUANTILE}"
    body: list[Block] = [
        KeyValues((("rounds", str(result.rounds)),
                   ("ratio", f"variant {low} / {result.baseline} {low}, 95% interval over rounds"),
                   ("statistic", f"each round's {low} and p50 call, median over rounds"))),
        Table.from_rows(("variant", f"{low} ms", "p50 ms", "ratio", "model MB", "RSS growth MB", "error"), rows),
    ]
    if result.warning:
        body.append(Note(result.warning, "warn"))
    verdict = Verdict(result.headline, "warn" if result.warning else "ok") if hasattr(result, "headline") else None
    return Section(title, badge, tuple(body), verdict=verdict)


# The benchmark builders above are registered here, beside their bodies' owners' code.
presents("exporter.bench.latency.BenchmarkResult")(benchmark_section)
presents("exporter.bench.latency.SweepResult")(sweep_section)
presents("exporter.bench.compare.Comparison")(
    lambda result: comparison_section(result, title=f"Variants against {result.baseline}"))


def render(obj: Any) -> Section:
    """The :class:`Section` of any result with a registered builder (Session, VerifyResult,
    BenchmarkResult, SweepResult, Comparison, ProfileResult, DimOutcomes, Guards,
    SuggestedFixes, Failure, NodeMapping); a Section is returned as it is. Raises
    ``TypeError`` for anything else."""
    if isinstance(obj, Section):
        return obj
    return lower(obj)


def to_markdown(obj: Any, level: int = 2) -> str:
    """The Markdown of :func:`render` (the CLI's ``summary.md``)."""
    return render(obj).to_markdown(level)


def _error_section(title: str, exc: BaseException) -> Section:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Section(title, Badge("display error", "fail"), (Note("this could not be displayed:", "fail"), Pre(text)))


def _safe(builder: Any, obj: Any, title: str) -> Section:
    try:
        return builder(obj)
    except Exception as exc:  # noqa: BLE001 - a renderer never kills a cell
        return _error_section(title, exc)


def to_html(obj: Any) -> str:
    """The HTML fragment of :func:`render` (inline CSS, no script)."""
    return _frame(render(obj).to_html())


def repr_html(obj: Any) -> str:
    """What ``_repr_html_`` returns: :func:`to_html`, or a box showing why rendering failed."""
    try:
        return to_html(obj)
    except Exception as exc:  # noqa: BLE001 - a renderer never kills a cell
        return _frame(_error_section(type(obj).__name__, exc).to_html())


set_html_renderer(repr_html)


@dataclass(frozen=True)
class Document:
    """A standalone HTML page: a title, a line under it, sections."""

    title: str
    sections: tuple[Section, ...] = ()
    subtitle: str = ""
    meta: tuple[tuple[str, str], ...] = field(default=())

    def to_text(self) -> str:
        head = [self.title] + ([self.subtitle] if self.subtitle else [])
        return "\n\n".join(["\n".join(head), *(s.to_text() for s in self.sections)])

    def to_markdown(self) -> str:
        head = [f"# {_md_text(self.title)}"] + ([_md_text(self.subtitle)] if self.subtitle else [])
        return "\n\n".join(head + [s.to_markdown(2) for s in self.sections]) + "\n"

    def to_html(self) -> str:
        toc = "".join(f'<li><a href="#{_e(s.anchor)}">{_e(s.title)}</a> {s.badge.to_html() if s.badge else ""}</li>'
                      for s in self.sections if s.anchor)
        nav = f'<nav><ul style="margin:4px 0 12px 0">{toc}</ul></nav>' if toc else ""
        sub = f'<p style="color:#4b5563;margin:0 0 8px 0">{_e(self.subtitle)}</p>' if self.subtitle else ""
        body = "".join(s.to_html(level=2) for s in self.sections)
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>{_e(self.title)}</title></head>"
            f'<body style="{_FONT};margin:16px 24px;max-width:1400px">'
            f'<h1 style="font-size:1.5em;margin:0 0 4px 0">{_e(self.title)}</h1>{sub}{nav}{body}'
            "</body></html>\n"
        )


# -- per-node numeric differences (exporter.graphs.intermediates) ---------------------------------


@presents("exporter.graphs.intermediates.IntermediateComparison")
def intermediates_section(result: Any, title: str = "Intermediate values", top: int = 10) -> Section:
    """``session.compare_intermediates()``: the verdict (the first bad node, or all match),
    the first bad node's pair, the ``top`` largest errors, then what was run and held."""
    from dataclasses import replace as _replace

    bad = result.first_bad
    tone = "fail" if result.error or bad is not None or result.program_differs else "ok"
    badge = Badge.status(result.status)
    verdict = Verdict(result.verdict, tone)
    if result.error:
        return Section(title, badge, (Note(result.error, "fail"),), verdict=verdict)
    body: list[Block] = []
    if result.program_differs:
        body.append(Note(result.program_differs, "warn"))
    if bad is not None:
        body.append(Pre(bad.describe() + (f"\n  at: {bad.source}" if bad.source else "")))
    compared = [r for r in result.rows if r.status != "not compared"]
    worst = sorted(compared, key=lambda r: (not r.bad, -(r.max_abs if r.max_abs is not None else math.inf)))[:top]
    table = Table.from_rows(
        ("ONNX node", "op", "FX node", "module", "status", "max abs", "max rel", "allowed abs"),
        [(r.onnx_node, r.onnx_op, r.fx_value, r.module, r.status, r.max_abs, r.max_rel, r.atol_applied) for r in worst],
        caption=f"the {len(worst)} largest differences", badges=("status",))
    table = _replace(table, rows=tuple(
        tuple(Badge(c.text, "fail") if isinstance(c, Badge) and c.text == "mismatch" else c for c in row)
        for row in table.rows))
    body.append(table)
    skipped: dict[str, int] = {}
    for r in result.rows:
        if r.status == "not compared":
            reason = r.reason or ""
            if reason.startswith("an inner step"):  # one line for all, not one per FX node
                reason = "an inner step of an FX node's translation: no FX counterpart"
            skipped[reason] = skipped.get(reason, 0) + 1
    if skipped:
        body.append(Details(f"{len(result.rows) - len(compared)} node(s) not compared",
                            (Table.from_rows(("reason", "nodes"), sorted(skipped.items(), key=lambda kv: -kv[1])),)))
    body.append(KeyValues((
        ("case", result.case),
        ("runs", f"{result.chunks} onnxruntime, {result.fx_runs} FX interpreter"),
        ("values held at most", f"{number(result.peak_bytes / 2**20)} MiB"),
        ("seconds", number(result.seconds)),
    )))
    return Section(title, badge, tuple(body), verdict=verdict)


# -- the optimizer pass by pass (exporter.passes) ---------------------------------------------------


_PASS_TONE = {"changed": "info", "no change": "muted", "skipped": "muted", "failed": "fail", "broken": "fail"}


def _pass_badge(status: str) -> Badge:
    return Badge(status, _PASS_TONE.get(status, "muted"))


@presents("exporter.passes.OptimizerPasses", "exporter.passes.PassDiff", "exporter.passes.PassRecord",
          "exporter.passes.Bisection")
def passes_section(result: Any, title: str | None = None) -> Section:
    """``session.passes`` (one row per pass and round), a pass's ``diff()`` (the nodes it
    added, removed and changed), a single ``PassRecord`` (its diff), ``bisect_passes()``
    (the verdict, the fix, one row per verify run)."""
    from dataclasses import replace as _replace

    kind = type(result).__name__
    if kind == "PassRecord":
        return passes_section(result.diff(), title)
    if kind == "Bisection":
        tone = {"fail": "fail", "pass": "ok"}.get(result.status, "warn")
        body: list[Block] = []
        if result.fix:
            body.append(Code(result.fix))
        body.append(Table.from_rows(
            ("passes applied", "after", "onnxruntime", "detail"),
            [(p.prefix, p.after, p.outcome, p.detail) for p in result.probes],
            caption=f"{result.verify_runs} verify run(s) on the {result.case} inputs; "
            f"{result.candidates} of {result.passes} passes changed the model"))
        return Section(title or "Which pass broke it", Badge.status(result.status), tuple(body),
                       verdict=Verdict(result.verdict, tone))
    if kind == "PassDiff":
        rows = [(c.kind, c.name, c.op, c.what) for c in result.changes]
        rows += [("initializer added", n, "", "") for n in result.initializers_added]
        rows += [("initializer removed", n, "", "") for n in result.initializers_removed]
        headline = (f"{len(result.added)} node(s) added, {len(result.removed)} removed, {len(result.changed)} changed; "
                    f"{result.nodes_before} → {result.nodes_after} nodes")
        body = [Note(result.description)] if result.description else []
        body.append(Table.from_rows(("change", "node", "op", "what"), rows) if rows else Note("nothing changed"))
        return Section(title or f"Pass {result.index}: {result.label}", None, tuple(body),
                       verdict=Verdict(headline, "info" if rows else "muted"))
    records = result.records
    if not records:
        return Section(title or "Optimizer passes", Badge.status(Status.SKIPPED),
                       (Note(result.note or "no pass ran"),))
    table = Table.from_rows(
        ("#", "pass", "status", "seconds", "nodes before", "nodes after", "added", "removed", "changed",
         "initializers folded", "checks", "error"),
        [(r.index, r.label, r.status, r.seconds, r.nodes_before, r.nodes_after, len(r.added), len(r.removed),
          len(r.changed), r.initializers_folded, "yes" if r.checks else "no", r.error or r.check_error)
         for r in records])
    table = _replace(table, rows=tuple(row[:2] + (_pass_badge(records[i].status),) + row[3:]
                                       for i, row in enumerate(table.rows)))
    failed = result.failed
    changed = sum(1 for r in records if r.ran and r.changes_model)
    verdict = (Verdict(f"{failed.label} raised: {failed.error}; skip it with "
                       f"ExportOptions(skip_passes=[{failed.name!r}])", "fail") if failed is not None
               else Verdict(f"{len(records)} passes, {changed} changed the model: {records[0].nodes_before} → "
                            f"{records[-1].nodes_after} nodes in {number(result.seconds)} s", "ok"))
    body = [table]
    if result.skip_passes:
        body.append(Note("skipped: " + ", ".join(result.skip_passes)))
    return Section(title or "Optimizer passes", Badge.status(Status.FAILED if failed else Status.OK), tuple(body),
                   verdict=verdict)
