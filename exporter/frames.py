"""Source frames in messages: the innermost frame of the user's code, and how a source line is
named (a notebook cell as IPython names it). Which files are the user's is one rule,
:func:`exporter.compat.frames.is_user_file`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .compat.formats import traceback_frames
from .compat.frames import is_user_file

__all__ = ["short_path", "short_source", "source_label", "source_of_stack", "user_frame"]

T = TypeVar("T")


def user_frame(frames: Iterable[T], filename: Callable[[T], str] | None = None) -> T | None:
    """The innermost (last) of ``frames`` whose file is the user's, or None.

    ``frames`` run outermost first: ``traceback.FrameSummary`` objects, or tuples whose first
    item is the file name; ``filename`` reads the file name of anything else."""
    read = filename or _filename
    found = None
    for frame in frames:
        if is_user_file(read(frame)):
            found = frame
    return found


def _filename(frame: Any) -> str:
    return frame.filename if hasattr(frame, "filename") else frame[0]


def source_label(filename: str | None, line: int | str | None, *, short: bool = False) -> str:
    """How messages name a source line: ``/path/model.py:12`` (``model.py:12`` when ``short``),
    or, for a notebook cell, ``Cell In[3], line 12`` as IPython's own tracebacks say, instead
    of the kernel's temporary file (``/tmp/ipykernel_4242/2877541485.py:12``)."""
    if not filename:
        return "(unknown)"
    cell = _cell_label(filename)
    if cell is not None:
        return f"{cell}, line {line}"
    return f"{os.path.basename(filename) if short else filename}:{line}"


def _cell_label(filename: str) -> str | None:
    """``Cell In[3]`` when ``filename`` is a cell of the running IPython shell."""
    import sys

    if "IPython" not in sys.modules:  # never import IPython for this
        return None
    try:
        shell = sys.modules["IPython"].get_ipython()
        label = shell.compile.format_code_name(filename) if shell is not None else None
    except Exception:  # noqa: BLE001 - an IPython without this API: keep the file name
        return None
    return " ".join(label) if label else None


def source_of_stack(stack_trace: str | None) -> str | None:
    """The innermost user frame of an FX node's ``stack_trace`` as ``file:line in func: code``
    (the innermost frame when none is the user's); None without a trace."""
    frames = _stack_frames(stack_trace) if stack_trace else ()
    if not frames:
        return None
    filename, line, func, code = user_frame(frames) or frames[-1]
    return f"{source_label(filename, line)} in {func}: {code}"


@functools.lru_cache(maxsize=1024)
def _stack_frames(stack_trace: str) -> tuple[tuple[str, int, str, str], ...]:
    """The frames of a stack trace, parsed once per text: the nodes of one module call share
    one trace, and each graph of an export reads them all. Which frame is the user's and how
    it is labelled are decided per call (a notebook cell's answers change as cells run)."""
    return tuple(traceback_frames(stack_trace))


# -- paths as a person reads them --------------------------------------------------------------
_INSTALLED_PREFIX = re.compile(r"^(?:[A-Za-z]:)?.*?[/\\](?:site|dist)-packages[/\\]")


def short_path(filename: str) -> str:
    """A file as a person reads it: an installed package's file relative to its
    ``site-packages`` (``transformers/models/bert/modeling_bert.py``), a file under the working
    directory relative to it, any other absolute path by its file name."""
    text = _INSTALLED_PREFIX.sub("", filename, count=1)
    if text != filename:
        return text.replace("\\", "/")
    if not os.path.isabs(filename):
        return filename
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return os.path.basename(filename)
    return os.path.basename(filename) if relative.startswith("..") else relative


_LEADING_PATH = re.compile(r"^((?:[A-Za-z]:)?[/\\][^:]*?):(?=\d)")


def short_source(source: str | None) -> str | None:
    """``/…/site-packages/transformers/models/bert/modeling_bert.py:95: code`` →
    ``transformers/models/bert/modeling_bert.py:95: code`` (:func:`short_path` of the leading
    file); anything else unchanged."""
    if not source:
        return source
    found = _LEADING_PATH.match(source)
    if found is None:
        return source
    return short_path(found.group(1)) + source[found.end(1):]
