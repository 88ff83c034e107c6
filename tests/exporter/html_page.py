"""``Page``: what a browser would see of rendered HTML, for the display and report tests."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """Elements, attributes, text, the rows of each table, and the text of each ``<section>``
    by its id (a section without one counts toward its enclosing section)."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.text: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.sections: dict[str, list[str]] = {}
        self._open_tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self._sections: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend((tag, k, v or "") for k, v in attrs)
        if tag == "table":
            self._open_tables.append([])
        elif tag == "tr" and self._open_tables:
            self._open_tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "section":
            ident = dict(attrs).get("id") or (self._sections[-1] if self._sections else "")
            self._sections.append(ident)
            self.sections.setdefault(ident, [])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._open_tables:
            self._open_tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table" and self._open_tables:
            self.tables.append(self._open_tables.pop())
        elif tag == "section" and self._sections:
            self._sections.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        for ident in set(self._sections):
            self.sections[ident].append(data)

    @property
    def all_text(self) -> str:
        return "".join(self.text)

    def section_text(self, ident: str) -> str:
        return " ".join(" ".join(self.sections[ident]).split())

    def classes(self) -> set[str]:
        return {c for _, k, v in self.attrs if k == "class" and v for c in v.split()}
