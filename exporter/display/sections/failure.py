"""A failure on its own (:class:`~exporter.errors.Failure`) as a section."""

from __future__ import annotations

from ...errors import Failure, Status
from ...presentation import presents
from ..blocks import Badge, Section
from ..failures import failure_blocks

__all__ = ["failure_section"]


@presents(Failure)
def failure_section(failure: Failure, title: str | None = None) -> Section:
    """A failure on its own: ``<stage> failed`` and :func:`~exporter.display.failure_blocks`."""
    return Section(title or f"{failure.stage} failed", Badge.status(Status.FAILED), tuple(failure_blocks(failure)))
