"""Running the user's module for comparison or timing without changing it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .model_state import StateReport, preserved


@contextlib.contextmanager
def preserved_buffers(model: Any, *, what: str = "") -> Iterator[StateReport]:
    """Put ``model`` back as it was when the block ends: a forward that updates buffers in
    place (running statistics, counters, caches), rebinds an attribute (Swin's
    ``window_size`` after a call at a tiny size) or stores a tensor on a module must not
    change the user's module, nor make a second verification compare against a different
    model. Yields the :class:`~exporter.model_state.StateReport` of what the run changed
    (filled when the block ends); see :func:`exporter.model_state.preserved`."""
    with preserved(model, what=what) as report:
        yield report
