"""The blocks every result is lowered to, each with a text, a Markdown and an HTML output.

- :class:`Section`: a title, a status :class:`Badge`, an optional one-line :class:`Verdict`
  (verdict first: passed / failed / busy machine and the one number that matters), a body of
  blocks and sub-sections, an ``anchor`` for links.
- :class:`KeyValues` (``key: value`` lines), :class:`Table` (columns and rows of cells),
  :class:`Note` (a sentence, toned), :class:`Bullets` (a list of :class:`Item`: a sentence
  each, with labelled lines under it: ``likely cause:``, ``fix:``), :class:`Pre` (preformatted
  text), :class:`Code`
  (copy-able code: a fenced block in Markdown, ``<pre><code class="oxw-code">`` in HTML),
  :class:`Svg` (Graphviz's drawing), :class:`Verdict` (one line, toned),
  :class:`Details` (blocks folded under a one-line summary: ``<details>`` in HTML, indented
  text in text; ``in_text=False`` leaves them out of the text, e.g. a traceback),
  :class:`Raw` (markup built from blocks, HTML only).

Tables are made for reading: numbers right-aligned at 3 significant digits (0 is ``0``),
missing values blank, short cells never wrap, long text is cut with the full text in a
``title`` tooltip and listed in a folded ``<details>`` below the table, the header is sticky,
and every table sits in a container that scrolls sideways inside its pane
(``overflow-x:auto; max-width:100%``).

Every string that comes from the user or from torch is escaped; the only markup passed
through is Graphviz's SVG, after :func:`clean_svg`, and :class:`Raw` markup built from blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Union

from .cells import cell, is_missing, is_number, numeric_text
from .style import (
    BOX_CSS,
    HEADING_SIZE,
    SCROLL_CSS,
    TABLE_CSS,
    TD_CSS,
    TD_KV_CSS,
    TH_CSS,
    TH_KV_CSS,
    TONE_COLOR,
    TONE_STYLE,
    escape,
    fence,
    frame,
    markdown_text,
    status_word,
    tone_of,
)

__all__ = [
    "Badge",
    "Block",
    "Bullets",
    "Cell",
    "Code",
    "Details",
    "Item",
    "KeyValues",
    "Note",
    "Pre",
    "Raw",
    "Section",
    "Svg",
    "Table",
    "Verdict",
    "cell_html",
    "cell_markdown",
    "cell_text",
    "clean_svg",
]


class Block(Protocol):
    """What every block has: its text lines, its Markdown and its HTML."""

    def text_lines(self) -> list[str]: ...

    def to_markdown(self) -> str: ...

    def to_html(self) -> str: ...


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
        style = TONE_STYLE.get(self.tone, TONE_STYLE["muted"])
        return (f'<span class="oxw-badge oxw-{escape(self.tone)}" style="{style};border-radius:3px;'
                f'padding:0 5px;font-size:0.85em;font-weight:600;white-space:nowrap">{escape(self.text)}</span>')


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
        return f"**{markdown_text(self.text)}**"

    def to_html(self) -> str:
        return _paragraph("verdict", self.tone, self.text, "margin:2px 0 6px 0;font-weight:600")


def _paragraph(kind: str, tone: str, text: str, style: str) -> str:
    """A toned ``<p>`` (a verdict, a note)."""
    color = TONE_COLOR.get(tone, TONE_COLOR["muted"])
    return (f'<p class="oxw-{kind} oxw-{escape(tone)}" style="{style};color:{color};overflow-wrap:anywhere">'
            f'{escape(text)}</p>')


@dataclass(frozen=True)
class KeyValues:
    """``key: value`` lines."""

    items: tuple[tuple[str, Cell], ...]

    def text_lines(self) -> list[str]:
        width = max((len(k) for k, _ in self.items), default=0)
        return [f"{k + ':':<{width + 1}} {cell_text(v)}".rstrip() for k, v in self.items]

    def to_markdown(self) -> str:
        return "\n".join(f"- **{markdown_text(k)}**: {cell_markdown(v)}" for k, v in self.items)

    def to_html(self) -> str:
        rows = "".join(
            f'<tr><th style="{TH_KV_CSS}">{escape(k)}</th>'
            f'<td style="{TD_KV_CSS}">{cell_html(v)}</td></tr>'
            for k, v in self.items
        )
        return f'<table class="oxw-kv" style="{TABLE_CSS};max-width:100%">{rows}</table>'


_LONG = 48  # characters a table cell shows before it is cut (the full text: tooltip and details)


@dataclass(frozen=True)
class Table:
    """Columns and rows of cells (strings or badges). ``align`` holds ``"r"`` for the
    columns of numbers (right-aligned), ``"l"`` otherwise; ``code`` names the columns that
    hold code (monospace in HTML, backquoted in Markdown); ``wrap`` names the columns whose
    text wraps in HTML instead of being cut (a verdict sentence: never cut); ``not_in_text``
    names the columns the text leaves out (a long detail a terminal reads elsewhere)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""
    align: tuple[str, ...] = ()
    code: tuple[str, ...] = ()
    wrap: tuple[str, ...] = ()
    not_in_text: tuple[str, ...] = ()

    @classmethod
    def from_rows(cls, columns: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "",
                  badges: Sequence[str] = (), code: Sequence[str] = (), wrap: Sequence[str] = (),
                  not_in_text: Sequence[str] = ()) -> Table:
        """Cells are formatted with :func:`cell`; columns named in ``badges`` show status
        badges; a column whose every value is a number is right-aligned."""
        columns = tuple(columns)
        as_badge = {columns.index(c) for c in badges if c in columns}
        raw = [tuple(row) for row in rows]
        out = []
        for row in raw:
            out.append(tuple(
                Badge.status(value) if i in as_badge and not is_missing(value) else cell(value)
                for i, value in enumerate(row)
            ))
        align = []
        for i in range(len(columns)):
            values = [row[i] for row in raw if i < len(row) and not is_missing(row[i]) and row[i] != ""]
            numeric = bool(values) and i not in as_badge and all(
                is_number(v) or (isinstance(v, str) and numeric_text(v)) for v in values)
            align.append("r" if numeric else "l")
        return cls(columns, tuple(out), caption, tuple(align), tuple(c for c in code if c in columns),
                   tuple(c for c in wrap if c in columns), tuple(c for c in not_in_text if c in columns))

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
        shown = [i for i, c in enumerate(self.columns) if c not in self.not_in_text]
        cells = [list(self.columns)] + [[cell_text(c) for c in row] for row in self.rows]
        cells = [[row[i].replace("\n", " ") if i < len(row) else "" for i in shown] for row in cells]
        widths = [max(len(row[j]) for row in cells) for j in range(len(shown))]
        lines = [self.caption] if self.caption else []
        for row in cells:
            lines.append("  ".join(c.rjust(w) if self._right(i) else c.ljust(w)
                                   for i, c, w in zip(shown, row, widths)).rstrip())
        return lines

    def to_markdown(self) -> str:
        code = {self.columns.index(c) for c in self.code}

        def md(value: Cell, i: int) -> str:
            text = cell_text(value).replace("\n", " ")
            if i in code and text:
                return "`" + text.replace("|", "\\|") + "`"  # GitHub tables need \| inside code too
            return cell_markdown(value).replace("|", "\\|").replace("\n", " ")

        head = "| " + " | ".join(markdown_text(c).replace("|", "\\|") for c in self.columns) + " |"
        rule = "|" + "|".join(" ---: " if self._right(i) else " --- " for i in range(len(self.columns))) + "|"
        rows = ["| " + " | ".join(md(c, i) for i, c in enumerate(row)) + " |" for row in self.rows]
        caption = [f"*{markdown_text(self.caption)}*", ""] if self.caption else []
        return "\n".join(caption + [head, rule] + rows)

    def to_html(self) -> str:
        caption = (f'<caption style="text-align:left;font-weight:600;padding:2px 0">{escape(self.caption)}</caption>'
                   if self.caption else "")
        code = {self.columns.index(c) for c in self.code}
        head = "".join(f'<th style="{TH_CSS}{";text-align:right" if self._right(i) else ""}">{escape(c)}</th>'
                       for i, c in enumerate(self.columns))
        long_texts: list[tuple[str, str, str]] = []
        wrapped = {self.columns.index(c) for c in self.wrap}
        body = []
        for row in self.rows:
            cells = []
            for i, value in enumerate(row):
                style = TD_CSS + (";text-align:right;font-variant-numeric:tabular-nums" if self._right(i) else "")
                if i in wrapped:
                    style += ";white-space:normal;overflow-wrap:anywhere;min-width:8em"
                elif wrapped:  # the short columns as narrow as their text: the wrapped ones take the rest
                    style += ";width:1%"
                if isinstance(value, Badge) or len(value) <= _LONG or i in wrapped:
                    inner = cell_html(value)
                    inner = f"<code>{inner}</code>" if i in code and inner else inner
                    cells.append(f'<td style="{style}">{inner}</td>')
                    continue
                short = value[: _LONG - 1].rstrip() + "…"
                inner = f"<code>{escape(short)}</code>" if i in code else escape(short)
                cells.append(f'<td style="{style}" title="{escape(value)}">{inner}</td>')
                label = cell_text(row[0]) if i else ""
                long_texts.append((label, self.columns[i] if i < len(self.columns) else "", value))
            body.append("<tr>" + "".join(cells) + "</tr>")
        table = (f'<table class="oxw-table" style="{TABLE_CSS}">{caption}<thead><tr>{head}</tr></thead>'
                 f'<tbody>{"".join(body)}</tbody></table>')
        parts = [f'<div class="oxw-scroll" style="{SCROLL_CSS}">{table}</div>']
        if long_texts:
            items = "".join(
                f'<li><b>{escape(label)}</b>{" " if label else ""}<i>{escape(column)}</i>: '
                f'<span style="white-space:pre-wrap;overflow-wrap:anywhere">{escape(text)}</span></li>'
                for label, column, text in long_texts)
            parts.append(Details(f"full text ({len(long_texts)} cut cell{'s' if len(long_texts) != 1 else ''})",
                                 (Raw(f'<ul style="margin:2px 0;padding-left:1.2em">{items}</ul>'),)).to_html())
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
        return fence(self.text, "text")

    def to_html(self) -> str:
        return f'<pre class="oxw-pre" style="{BOX_CSS};white-space:pre-wrap;overflow-wrap:anywhere">{escape(self.text)}</pre>'


@dataclass(frozen=True)
class Code(_Lines):
    """Code to copy (a dim spec, a fix): a fenced block in Markdown, monospace in HTML."""

    text: str
    language: str = "python"

    def to_markdown(self) -> str:
        return fence(self.text, self.language)

    def to_html(self) -> str:
        return (f'<pre class="oxw-code-block" style="{BOX_CSS};overflow-x:auto">'
                f'<code class="oxw-code language-{escape(self.language)}">{escape(self.text)}</code></pre>')


@dataclass(frozen=True)
class Note(_Lines):
    """A sentence, optionally toned (a warning, a failure)."""

    text: str
    tone: str = "muted"

    def to_markdown(self) -> str:
        text = markdown_text(self.text).replace("\n", "  \n")
        return f"**{text}**" if self.tone in ("fail", "warn") else text

    def to_html(self) -> str:
        return _paragraph("note", self.tone, self.text, "margin:4px 0;white-space:pre-wrap")


@dataclass(frozen=True)
class Item:
    """One entry of :class:`Bullets`: a sentence and the labelled lines under it
    (``(("likely cause", ...), ("fix", ...))``). ``badge``: a status shown before the sentence;
    ``tone``: the sentence's colour in HTML; ``tag``: a short key shown before it in HTML and
    Markdown (a finding's kind, to filter on), left out of the text, which reads as sentences."""

    text: str
    details: tuple[tuple[str, str], ...] = ()
    badge: Badge | None = None
    tone: str = "muted"
    tag: str = ""

    def text_lines(self) -> list[str]:
        head = (f"{self.badge.to_text()} " if self.badge else "") + self.text
        first, *rest = head.splitlines() or [""]
        lines = [f"- {first}"] + [f"  {line}" for line in rest]
        for label, value in self.details:
            first, *rest = value.splitlines() or [""]
            lines.append(f"    {label}: {first}")
            lines.extend(f"      {line}" for line in rest)
        return [line.rstrip() for line in lines]

    def to_markdown(self) -> str:
        tag = f"`{self.tag}` " if self.tag else ""
        badge = f"{self.badge.to_markdown()} " if self.badge else ""
        lines = [f"- {tag}{badge}{_markdown_lines(self.text)}"]
        lines.extend(f"  - *{markdown_text(label)}*: {_markdown_lines(value)}" for label, value in self.details)
        return "\n".join(lines)

    def to_html(self) -> str:
        color = TONE_COLOR.get(self.tone, TONE_COLOR["muted"])
        tag = f'<code class="oxw-tag" style="color:#6b7280">{escape(self.tag)}</code> ' if self.tag else ""
        badge = self.badge.to_html() + " " if self.badge else ""
        details = "".join(f'<div style="color:#374151;white-space:pre-wrap"><i>{escape(label)}</i>: {escape(value)}</div>'
                          for label, value in self.details)
        return (f'<li style="margin:3px 0;overflow-wrap:anywhere">{badge}{tag}'
                f'<span class="oxw-{escape(self.tone)}" style="color:{color};white-space:pre-wrap">{escape(self.text)}</span>'
                f'{details}</li>')


def _markdown_lines(text: str) -> str:
    """Text inside a Markdown list item: escaped, its line breaks kept."""
    return markdown_text(text).replace("\n", "  \n    ")


@dataclass(frozen=True)
class Bullets:
    """A list of :class:`Item` (findings, what was checked): in text each sentence after
    ``- `` with its labelled lines indented under it (``    likely cause: ...``), a ``<ul>`` in
    HTML, a nested list in Markdown."""

    items: tuple[Item, ...]

    def text_lines(self) -> list[str]:
        return [line for item in self.items for line in item.text_lines()]

    def to_markdown(self) -> str:
        return "\n".join(item.to_markdown() for item in self.items)

    def to_html(self) -> str:
        if not self.items:
            return ""
        items = "".join(item.to_html() for item in self.items)
        return f'<ul class="oxw-list" style="margin:4px 0;padding-left:1.4em">{items}</ul>'


@dataclass(frozen=True)
class Svg:
    """An SVG drawing made by Graphviz (text form: a placeholder line). Cleaned on output."""

    svg: str
    alt: str = "graph drawing"

    def text_lines(self) -> list[str]:
        return [f"({self.alt}: SVG, {len(self.svg)} characters)"]

    def to_markdown(self) -> str:
        return f"*({markdown_text(self.alt)}: an SVG drawing, shown in the HTML report)*"

    def to_html(self) -> str:
        cleaned = clean_svg(self.svg)
        if cleaned is None:
            return Note(f"{self.alt} left out: it contained active content", "warn").to_html()
        # Fitted to the page's width (Graphviz writes a viewBox, so it scales whole); a drawing
        # taller than the window scrolls inside its box.
        fitted = re.sub(r"<svg\b(?![^>]*\bstyle=)", '<svg style="max-width:100%;height:auto"', cleaned, count=1)
        return (f'<div class="oxw-svg" style="overflow:auto;max-width:100%;max-height:80vh;'
                f'border:1px solid #e5e7eb">{fitted}</div>')


@dataclass(frozen=True)
class Raw:
    """Markup built from blocks (escaped already), as a block; never user text. Shows in
    HTML only."""

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
        return "\n\n".join([f"*{markdown_text(self.summary)}*"] + [b.to_markdown() for b in self.body if b.to_markdown()])

    def to_html(self) -> str:
        if not self.body:
            return ""
        inner = "".join(b.to_html() for b in self.body)
        return (f'<details class="oxw-details"{" open" if self.open else ""} style="margin:4px 0">'
                f'<summary style="cursor:pointer;color:#374151">{escape(self.summary)}</summary>{inner}</details>')


@dataclass(frozen=True)
class Section:
    """A titled part with an optional status badge and one-line verdict; its body holds
    blocks and sub-sections. ``verdict_as_title``: in text, the verdict is the first line in
    place of the title and badge (a verdict that already names both: ``Verification PASSED:
    ...``); Markdown and HTML keep the heading."""

    title: str
    badge: Badge | None = None
    body: tuple[Block, ...] = ()
    anchor: str = ""
    verdict: Verdict | None = None
    verdict_as_title: bool = False

    def text_lines(self) -> list[str]:
        if self.verdict_as_title and self.verdict:
            lines, blocks = [self.verdict.text], tuple(self.body)
        else:
            lines = [self.title + (f" {self.badge.to_text()}" if self.badge else "")]
            blocks = ((self.verdict,) if self.verdict else ()) + tuple(self.body)
        for block in blocks:
            lines.extend(("  " + line).rstrip() for line in block.text_lines())
        return lines

    def to_text(self) -> str:
        return "\n".join(self.text_lines())

    def to_markdown(self, level: int = 2) -> str:
        hashes = "#" * max(1, min(level, 6))
        badge = f" {self.badge.to_markdown()}" if self.badge else ""
        parts = [f"{hashes} {markdown_text(self.title)}{badge}"]
        if self.verdict:
            parts.append(self.verdict.to_markdown())
        for block in self.body:
            text = block.to_markdown(level + 1) if isinstance(block, Section) else block.to_markdown()
            if text:
                parts.append(text)
        return "\n\n".join(parts)

    def to_html(self, level: int = 3) -> str:
        badge = " " + self.badge.to_html() if self.badge else ""
        anchor = f' id="{escape(self.anchor)}"' if self.anchor else ""
        parts = [self.verdict.to_html()] if self.verdict else []
        for block in self.body:
            parts.append(block.to_html(min(level + 1, 6)) if isinstance(block, Section) else block.to_html())
        return (f'<section class="oxw-section"{anchor} style="margin:6px 0 10px 0;max-width:100%">'
                f'<h{level} style="margin:4px 0;font-size:{HEADING_SIZE.get(level, "1em")}">{escape(self.title)}{badge}</h{level}>'
                f'<div style="margin-left:0.75em">{"".join(parts)}</div></section>')

    def _repr_html_(self) -> str:
        return frame(self.to_html())

    def __str__(self) -> str:
        return self.to_text()



def cell_text(value: Cell) -> str:
    """A cell's text (a badge's word)."""
    return value.text if isinstance(value, Badge) else value


def cell_markdown(value: Cell) -> str:
    """A cell in Markdown (text escaped, a badge as its word)."""
    return value.text if isinstance(value, Badge) else markdown_text(value)


def cell_html(value: Cell) -> str:
    """A cell in HTML (text escaped, a badge as its coloured span)."""
    return value.to_html() if isinstance(value, Badge) else escape(value)



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
