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

The package is two layers:

- this package's modules are the model, and import nothing from the project but
  :mod:`exporter.errors` and :mod:`exporter.presentation`, so any result may use them:
  :mod:`~exporter.display.blocks` (Section, Table, Note, Bullets... see there),
  :mod:`~exporter.display.document` (a standalone page), :mod:`~exporter.display.failures`
  (a failure as a person reads it), :mod:`~exporter.display.cells` (numbers and cells),
  :mod:`~exporter.display.style` (palette, inline CSS, escaping) and
  :mod:`~exporter.display.rendering` (:func:`render`, :func:`to_html`, :func:`repr_html`);
- :mod:`exporter.display.sections` builds each result type's section, registered by type
  name with :func:`exporter.presentation.presents`. It imports the results; results never
  import it (they inherit :class:`exporter.presentation.Presentable` for
  ``summary()``/``repr``/``_repr_html_``). :mod:`exporter` imports it, so every result
  renders once ``exporter`` is imported.

Status words come from one vocabulary (:class:`exporter.errors.Status`) and one palette
(:data:`TONES`). The HTML uses inline CSS only (no external resource, no JavaScript), so it
also shows in static renderings (nbconvert, GitHub) and in the standalone report
(:mod:`exporter.report`). A renderer never raises: :func:`repr_html` turns an error while
rendering into a box that shows it. Nothing heavy (torch, onnx, pandas) is imported.
"""

from .blocks import (
    Badge,
    Block,
    Bullets,
    Cell,
    Code,
    Details,
    Item,
    KeyValues,
    Note,
    Pre,
    Raw,
    Section,
    Svg,
    Table,
    Verdict,
    clean_svg,
)
from .cells import cell, number
from .document import Document
from .failures import failure_blocks, failure_sentence, user_terms
from .rendering import error_section, render, repr_html, safe_section, to_html, to_markdown
from .style import TONES, status_word, tone_of

__all__ = [
    "TONES",
    "Badge",
    "Block",
    "Bullets",
    "Cell",
    "Code",
    "Details",
    "Document",
    "Item",
    "KeyValues",
    "Note",
    "Pre",
    "Raw",
    "Section",
    "Svg",
    "Table",
    "Verdict",
    "cell",
    "clean_svg",
    "error_section",
    "failure_blocks",
    "failure_sentence",
    "number",
    "render",
    "repr_html",
    "safe_section",
    "status_word",
    "to_html",
    "to_markdown",
    "tone_of",
    "user_terms",
]

