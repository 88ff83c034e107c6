"""The public entry point: ``export(model, *args, options=ExportOptions(...), **kwargs)``."""

from __future__ import annotations

from typing import Any

from .options import ExportOptions
from .serializers import Serializer
from .session import Session

__all__ = ["ExportOptions", "Serializer", "export"]


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
