"""Running the user's module for comparison or timing without changing it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def preserved_buffers(model: Any) -> Iterator[None]:
    """Restore every buffer of ``model`` when the block ends: a forward that updates buffers
    in place (running statistics, counters, caches) must not change the user's module, nor
    make a second verification compare against a different model."""
    import torch

    if not isinstance(model, torch.nn.Module):
        yield
        return
    saved = [(buffer, buffer.detach().clone()) for buffer in model.buffers()]
    try:
        yield
    finally:
        with torch.no_grad():
            for buffer, value in saved:
                buffer.copy_(value)
