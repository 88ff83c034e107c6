"""torch's "compiling" and "exporting" flags, set around an eager run: what a model that asks
``torch.compiler.is_exporting()`` (transformers' masking utilities, for one) computes while
torch exports it, and where it asked."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["as_if_exporting"]

_QUERIES = ("is_exporting", "is_compiling")


def _asker(frame: Any) -> tuple[str, int] | None:
    """File and line of the first caller that is not a one-line ``is_*`` helper around the
    query (transformers' ``is_torchdynamo_exporting``)."""
    while frame is not None and frame.f_code.co_name.startswith("is_"):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


@contextmanager
def as_if_exporting() -> Iterator[list[tuple[str, int]]]:
    """Within: ``torch.compiler.is_exporting()`` and ``is_compiling()`` answer True, as while
    ``torch.export`` traces; yields the list of ``(file, line)`` that asked (in order, once
    each). Both flags and functions are restored after, whatever happens."""
    import torch.compiler as compiler

    saved_flags = (compiler._is_exporting_flag, compiler._is_compiling_flag)
    saved_functions = {name: getattr(compiler, name) for name in _QUERIES}
    asked: list[tuple[str, int]] = []

    def query(name: str) -> Any:
        def answer() -> bool:
            where = _asker(sys._getframe(1))
            if where and where not in asked:
                asked.append(where)
            return True

        answer.__name__ = answer.__qualname__ = name
        return answer

    compiler._is_exporting_flag = compiler._is_compiling_flag = True
    for name in _QUERIES:
        setattr(compiler, name, query(name))
    try:
        yield asked
    finally:
        compiler._is_exporting_flag, compiler._is_compiling_flag = saved_flags
        for name, function in saved_functions.items():
            setattr(compiler, name, function)
