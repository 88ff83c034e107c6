"""Any result as its section, and that section as Markdown or as HTML that never raises.

A result's section comes from the builder registered for its type
(:func:`exporter.presentation.presents`; the builders are :mod:`exporter.display.sections`,
registered when :mod:`exporter` is imported). Importing this module makes :func:`repr_html`
the ``_repr_html_`` of every :class:`~exporter.presentation.Presentable` result.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from ..presentation import lower, set_html_renderer
from .blocks import Badge, Note, Pre, Section
from .style import frame

__all__ = ["error_section", "render", "repr_html", "safe_section", "to_html", "to_markdown"]


def render(obj: Any) -> Section:
    """The :class:`Section` of any result with a registered builder (Session, VerifyResult,
    BenchmarkResult, SweepResult, Comparison, ProfileResult, DimOutcomes, Guards,
    SuggestedFixes, Failure, NodeMapping); a Section is returned as it is. Raises
    ``TypeError`` for anything else."""
    if isinstance(obj, Section):
        return obj
    section: Section = lower(obj)
    return section


def to_markdown(obj: Any, level: int = 2) -> str:
    """The Markdown of :func:`render` (the CLI's ``summary.md``)."""
    return render(obj).to_markdown(level)


def error_section(title: str, exc: BaseException) -> Section:
    """A section saying that something could not be displayed, and the error."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Section(title, Badge("display error", "fail"), (Note("this could not be displayed:", "fail"), Pre(text)))


def safe_section(builder: Callable[[Any], Section], obj: Any, title: str) -> Section:
    """``builder(obj)``, or the :func:`error_section` of what it raised."""
    try:
        return builder(obj)
    except Exception as exc:  # noqa: BLE001 - a renderer never kills a cell
        return error_section(title, exc)


def to_html(obj: Any) -> str:
    """The HTML fragment of :func:`render` (inline CSS, no script)."""
    return frame(render(obj).to_html())


def repr_html(obj: Any) -> str:
    """What ``_repr_html_`` returns: :func:`to_html`, or a box showing why rendering failed."""
    try:
        return to_html(obj)
    except Exception as exc:  # noqa: BLE001 - a renderer never kills a cell
        return frame(error_section(type(obj).__name__, exc).to_html())


set_html_renderer(repr_html)
