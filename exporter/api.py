"""The public entry point: ``export(model, *args, options=ExportOptions(...), **kwargs)``."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .options import ExportOptions
from .session import Session

__all__ = ["ExportOptions", "Serializer", "export"]


@runtime_checkable
class Serializer(Protocol):
    """Writes a session's artefact to a path or a binary file object (what
    :meth:`Session.save` calls; the built-in ones read only an
    :class:`~exporter.artifacts.ExportArtifacts` of it)."""

    def serialize(self, session: Session, destination: Any) -> Any: ...


def export(model: Any, /, *args: Any, options: ExportOptions | None = None, **kwargs: Any) -> Session:
    """Export ``model`` called as ``model(*args, **kwargs)`` to ONNX. ``model`` may be a
    ``torch.export.ExportedProgram``, as in ``torch.onnx.export``: it is used as captured
    (its example inputs when none are given, its dynamic dims when no spec is given).

    Runs capture → decompose → translate → optimize and returns the
    :class:`~exporter.Session`. Raises :class:`~exporter.SpecError` for an invalid dim spec
    before anything runs, and on a stage failure the stage's :class:`~exporter.ExportError`,
    whose ``.session`` keeps every stage and capture attempt.
    """
    session = Session(model, args, kwargs, options)  # an ExportedProgram is taken as torch.onnx.export does
    session.run()
    return session.raise_for_status()
