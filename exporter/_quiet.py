"""Silence noise from inside torch, onnxscript and onnx_ir that a user cannot act on.

Two kinds: deprecation warnings (:func:`quiet_library_warnings`) and what the libraries print
or log while a stage runs (:func:`captured_library_output`): torch prints the partial FX graph
of a failed capture to stderr and logs draft export's banner, which would otherwise fill a
notebook cell. That output is kept, not lost: each stage result holds it.

``quiet_library_warnings()`` hides ``FutureWarning`` and ``DeprecationWarning`` whose *source
module* (the module the warning is attributed to) is one of those libraries, or the standard
library plumbing their code passes through: torch's own ``isinstance(treespec, LeafSpec) is
deprecated`` warning, for one, is raised while ``copy.deepcopy`` rebuilds a pytree spec inside
``run_decompositions`` and is attributed to ``copyreg``. A warning attributed to the user's
code (their model's ``forward``, their script) is not touched, nor is any other category.

Caveat: like :func:`warnings.catch_warnings`, on which it is built, this changes the
*process-global* warning filters while the block runs and restores them on exit. Another
thread warning at the same time sees the same filters (so it can lose a torch deprecation
warning too, never one about its own code), and a block that itself changes the filters
loses those changes on exit.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import TextIO

from .compat.frames import is_user_file

__all__ = ["LIBRARY_MODULES", "PLUMBING_MODULES", "CapturedOutput", "captured_library_output", "quiet_library_warnings"]

#: Packages whose own deprecation warnings are hidden (the package and its submodules).
LIBRARY_MODULES = ("torch", "onnxscript", "onnx_ir", "onnx")
#: Standard-library modules a library's warning can be attributed to when its ``stacklevel``
#: lands outside the library (``copy.deepcopy`` → ``copyreg.__newobj__`` → ``LeafSpec.__new__``).
#: No user code lives there, so a warning attributed to them is never about the user's code.
PLUMBING_MODULES = ("copy", "copyreg", "typing_extensions", "functools", "contextlib", "abc")

_LIBRARY_PATTERN = r"(" + "|".join(LIBRARY_MODULES) + r")(\..*)?$"
_PLUMBING_PATTERN = r"(" + "|".join(PLUMBING_MODULES) + r")$"
_CATEGORIES = (FutureWarning, DeprecationWarning)


@contextlib.contextmanager
def quiet_library_warnings(enabled: bool = True) -> Iterator[None]:
    """Within the block, ignore ``FutureWarning`` / ``DeprecationWarning`` attributed to
    torch, onnxscript, onnx, onnx_ir or the stdlib modules in :data:`PLUMBING_MODULES`.
    ``enabled=False`` changes nothing (``onnx-workbench -v``). The filters are restored on exit."""
    if not enabled:
        yield
        return
    with warnings.catch_warnings():
        for category in _CATEGORIES:
            warnings.filterwarnings("ignore", category=category, module=_LIBRARY_PATTERN)
            warnings.filterwarnings("ignore", category=category, module=_PLUMBING_PATTERN)
        yield


class CapturedOutput:
    """What the libraries printed to stdout/stderr or logged on one thread."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def add(self, text: str) -> None:
        self._parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self._parts)


class _ThreadStream(io.TextIOBase):
    """Stands in for ``sys.stdout`` / ``sys.stderr``: writes from ``thread`` go to ``captured``
    while active, everything else (other threads: another notebook cell, the kernel) to the
    stream it replaced."""

    def __init__(self, original: TextIO, thread: int, captured: CapturedOutput) -> None:
        self._original, self._thread, self._captured, self.active = original, thread, captured, True

    def write(self, text: str) -> int:
        if self.active and threading.get_ident() == self._thread and not _from_user_code():
            self._captured.add(text)
            return len(text)
        return self._original.write(text)

    def flush(self) -> None:
        self._original.flush()

    def __getattr__(self, name: str) -> object:  # encoding, fileno, isatty... of the real stream
        return getattr(self._original, name)


def _from_user_code() -> bool:
    """Whether the ``print`` (or ``write``) being handled was called from the user's code: a
    ``print`` in the model's ``forward`` still shows while it is captured."""
    frame = sys._getframe(2)  # write <- _from_user_code; 2: whoever called print / write
    return frame is not None and is_user_file(frame.f_code.co_filename)


class _LibraryRecords(logging.Filter):
    """Keeps a library's records logged on ``thread`` from their handlers. ERROR records too:
    torch logs its own failure classification at ERROR ("always_classified is unsupported")
    while a stage's failure reaches the user as the stage's error, with its fix."""

    def __init__(self, thread: int, captured: CapturedOutput) -> None:
        super().__init__()
        self._thread, self._captured = thread, captured
        self._last: logging.LogRecord | None = None
        self._format = logging.Formatter("%(levelname)s %(name)s: %(message)s")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self._thread or record.name.split(".")[0] not in LIBRARY_MODULES:
            return True
        if record is self._last:  # the same record reaching a second handler
            return False
        self._last = record
        try:
            self._captured.add(self._format.format(record) + "\n")
        except Exception:  # noqa: BLE001 - a record that cannot format is dropped, as logging does
            pass
        return False


@contextlib.contextmanager
def captured_library_output(enabled: bool = True) -> Iterator[CapturedOutput]:
    """Within the block, what this thread prints to ``sys.stdout`` / ``sys.stderr``, and the
    torch / onnxscript / onnx / onnx_ir log records it emits, are collected in the
    yielded :class:`CapturedOutput` instead of shown. Other threads print and log as usual.
    With ``TORCH_LOGS`` set (the user asked torch for its logs) log records are left alone;
    ``enabled=False`` collects nothing."""
    captured = CapturedOutput()
    if not enabled:
        yield captured
        return
    thread = threading.get_ident()
    streams = {name: _ThreadStream(getattr(sys, name), thread, captured) for name in ("stdout", "stderr")}
    records = _LibraryRecords(thread, captured)
    handlers = [] if os.environ.get("TORCH_LOGS") else _all_handlers()
    for handler in handlers:
        handler.addFilter(records)
    for name, stream in streams.items():
        setattr(sys, name, stream)
    try:
        yield captured
    finally:
        for name, stream in streams.items():
            stream.active = False  # left in place if something replaced it meanwhile: passes through
            if getattr(sys, name) is stream:
                setattr(sys, name, stream._original)
        for handler in handlers:
            handler.removeFilter(records)


def _all_handlers() -> list[logging.Handler]:
    """Handlers that show records on a console: stream handlers other than files (and torch's
    structured-trace handler, which writes TORCH_TRACE files)."""
    loggers = [logging.getLogger()] + [
        logger for name, logger in list(logging.Logger.manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and not name.startswith("torch.__trace")
    ]
    handlers = {id(h): h for logger in loggers for h in logger.handlers}.values()
    return [h for h in handlers if isinstance(h, logging.StreamHandler)
            and not isinstance(h, logging.FileHandler) and "Trace" not in type(h).__name__]
