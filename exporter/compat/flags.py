"""torch's "compiling" and "exporting" flags, set around an eager run: what a model that asks
``torch.compiler.is_exporting()`` (transformers' masking utilities, for one) computes while
torch exports it, and where it asked."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["as_if_exporting"]

_QUERIES = ("is_exporting", "is_compiling")


def _asker(frame: Any) -> tuple[str, int] | None:
    """File and line of the first caller that is not a one-line ``is_*`` helper around the
    query (transformers' ``is_torchdynamo_exporting``)."""
    while frame is not None and (frame.f_code.co_name.startswith("is_") or _is_switch_frame(frame)):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def _is_switch_frame(frame: Any) -> bool:
    """A frame of the per-context switch :func:`~exporter.compat.shared_patch.shared_patch` installs."""
    return frame.f_globals.get("__name__") == f"{__package__}.shared_patch"


@contextmanager
def as_if_exporting() -> Iterator[list[tuple[str, int]]]:
    """Within, in this context only (:func:`~exporter.compat.shared_patch.shared_patch`: the
    user's code in another thread sees nothing): ``torch.compiler.is_exporting()`` and
    ``is_compiling()`` answer True, as while ``torch.export`` traces; yields the list of
    ``(file, line)`` that asked (in order, once each). The functions are restored after,
    whatever happens."""
    import torch.compiler as compiler

    from .shared_patch import answers_dynamo_compiling, replaced_by, shared_patch

    asked: list[tuple[str, int]] = []

    def query(name: str) -> Any:
        def answer() -> bool:
            where = _asker(sys._getframe(1))
            if where and where not in asked:
                asked.append(where)
            return True

        answer.__name__ = answer.__qualname__ = name
        return answer

    with contextlib.ExitStack() as stack:
        for name in _QUERIES:
            stack.enter_context(shared_patch(compiler, name, replaced_by(query(name)), answers_dynamo_compiling))
        yield asked
