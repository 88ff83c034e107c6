"""A standalone HTML page of sections (the report, :mod:`exporter.report`): one file that opens
offline, with a table of contents, inline CSS, no script and a Content-Security-Policy that
allows nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field

from .blocks import Section
from .style import FONT_CSS, escape, markdown_text

__all__ = ["Document"]


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
        head = [f"# {markdown_text(self.title)}"] + ([markdown_text(self.subtitle)] if self.subtitle else [])
        return "\n\n".join(head + [s.to_markdown(2) for s in self.sections]) + "\n"

    def to_html(self) -> str:
        toc = "".join(f'<li><a href="#{escape(s.anchor)}">{escape(s.title)}</a> {s.badge.to_html() if s.badge else ""}</li>'
                      for s in self.sections if s.anchor)
        nav = f'<nav><ul style="margin:4px 0 12px 0">{toc}</ul></nav>' if toc else ""
        sub = f'<p style="color:#4b5563;margin:0 0 8px 0">{escape(self.subtitle)}</p>' if self.subtitle else ""
        body = "".join(s.to_html(level=2) for s in self.sections)
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>{escape(self.title)}</title></head>"
            f'<body style="{FONT_CSS};margin:16px 24px;max-width:1400px">'
            f'<h1 style="font-size:1.5em;margin:0 0 4px 0">{escape(self.title)}</h1>{sub}{nav}{body}'
            "</body></html>\n"
        )
