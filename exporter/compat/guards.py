"""Every shape guard torch adds while tracing, recorded with its input sources and user frames."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any, Iterator

from .frames import is_user_file

__all__ = ["ShapeGuardEvent", "record_shape_guards"]

# torch emits every shape guard through ``ShapeEnv._log_guard``; with
# ``torch._logging._internal.GET_DTRACE_STRUCTURED`` set it also lands on the structured-trace
# logger as ``guard_added`` with the user's frames. That flag, however, turns on *every* dtrace
# event (one ``expression_created`` record with a captured stack per symbolic operation) and
# made a small export ~10x slower here. So the collector below wraps ``_log_guard`` alone and
# reads the same data torch puts in that record: the guard, the input sources of its symbols,
# and the user frames (dynamo's ``TracingContext`` stack in strict mode, the Python stack
# outside torch in non-strict mode).


@dataclass(frozen=True)
class ShapeGuardEvent:
    """One guard torch's ShapeEnv added while tracing, as plain data.

    ``prefix`` is torch's: ``"eval"`` for a guard, ``"runtime_assert"`` for a deferred assert.
    ``expr`` is the sympy boolean in torch symbols (``s77 > 2``). ``sources`` maps each symbol
    to every input source equal to it (``L['x'].size()[0]``; strict mode names inputs
    ``L['flat_args'][i]``). ``frames`` are the user frames, outermost first, each
    ``(filename, line, function, code)``."""

    prefix: str
    expr: Any
    sources: tuple[tuple[str, tuple[str, ...]], ...]
    frames: tuple[tuple[str, int, str, str], ...]


_GUARD_LOCK = threading.Lock()  # installing the recorder only; recording needs no lock
_GUARD_LOCAL = threading.local()  # .sinks: this thread's open record_shape_guards lists
_GUARD_MARK = "_exporter_records_shape_guards"  # set on the installed recorder


@functools.lru_cache(maxsize=1)
def _export_dir() -> str:
    """torch.export's directory: in non-strict mode the traced code's stack ends there."""
    import torch

    return os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "export", "")


def _user_frames(limit: int = 4) -> tuple[tuple[str, int, str, str], ...]:
    """The innermost ``limit`` user frames of the code being traced, outermost first."""
    import linecache

    from torch._guards import TracingContext

    traced = TracingContext.extract_stack()  # strict mode: dynamo's stack of the user's code
    if len(traced):
        picked = [f for f in traced if is_user_file(f.filename)][-limit:]
        return tuple((f.filename, f.lineno or 0, f.name, (f.line or "").strip()) for f in picked)
    # Non-strict: the Python stack, from the guard outward to torch.export's entry (frames
    # beyond it belong to whoever called the export, not to the traced code).
    frames: list[tuple[str, int, str, str]] = []
    boundary = _export_dir()
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and len(frames) < limit:
        code = frame.f_code
        if code.co_filename.startswith(boundary) and not code.co_filename.endswith("_patches.py"):
            break  # (torch/export/_patches.py is traced code: the RNN while_loop decompositions)
        if is_user_file(code.co_filename):
            line = linecache.getline(code.co_filename, frame.f_lineno).strip()
            frames.append((code.co_filename, frame.f_lineno, code.co_name, line))
        frame = frame.f_back
    return tuple(reversed(frames))


def _guard_event(shape_env: Any, prefix: str, expr: Any) -> ShapeGuardEvent:
    import sympy

    replacements = getattr(shape_env, "replacements", {})

    def resolve(symbol: Any) -> Any:
        for _ in range(32):
            target = replacements.get(symbol)
            if not isinstance(target, sympy.Symbol) or target == symbol:
                break
            symbol = target
        return symbol

    free = expr.free_symbols
    sources: dict[str, list[str]] = {str(s): [] for s in sorted(free, key=str)}
    for source, var in getattr(shape_env, "source_to_var", {}).items():
        if var in free:
            sources[str(var)].append(source)
        elif isinstance(var, sympy.Symbol):
            target = resolve(var)
            if target in free:
                sources[str(target)].append(source)
    return ShapeGuardEvent(
        prefix,
        expr,
        tuple((k, tuple(v)) for k, v in sources.items()),
        _user_frames(),
    )


def _is_recorder(method: Any) -> bool:
    """Whether ``method`` is the recorder, or wraps it (``functools.wraps`` keeps the mark)."""
    for _ in range(64):
        if method is None:
            return False
        if getattr(method, _GUARD_MARK, False):
            return True
        method = getattr(method, "__wrapped__", None)
    return False


def _install_guard_recorder() -> None:
    """Wrap ``ShapeEnv._log_guard`` once for the life of the process (never unwrapped, so a
    plain export in another thread never sees a half-removed patch). The wrapped method is
    held in the closure; the wrapper records only in threads inside ``record_shape_guards``
    and otherwise just calls it. Installing again is a no-op while the recorder is in place,
    even under another library's wrapper."""
    from torch.fx.experimental import symbolic_shapes

    shape_env_class: Any = symbolic_shapes.ShapeEnv  # Any: a method of it is replaced below
    with _GUARD_LOCK:
        current = shape_env_class.__dict__.get("_log_guard", shape_env_class._log_guard)
        if _is_recorder(current):
            return
        original = current

        @functools.wraps(original)
        def _log_guard(self: Any, prefix: str, g: Any, *args: Any, **kwargs: Any) -> Any:
            sinks = getattr(_GUARD_LOCAL, "sinks", None)
            if sinks and "suppressed" not in prefix:
                # Recorded once even when another wrapper sits between two recorders.
                if getattr(_GUARD_LOCAL, "current", None) != (id(self), prefix, id(g)):
                    try:
                        event = _guard_event(self, prefix, g)
                    except Exception:  # noqa: BLE001 - provenance is best effort, never breaks an export
                        event = None
                    if event is not None:
                        for sink in sinks:
                            sink.append(event)
                outer = getattr(_GUARD_LOCAL, "current", None)
                _GUARD_LOCAL.current = (id(self), prefix, id(g))
                try:
                    return original(self, prefix, g, *args, **kwargs)
                finally:
                    _GUARD_LOCAL.current = outer
            return original(self, prefix, g, *args, **kwargs)

        setattr(_log_guard, _GUARD_MARK, True)
        shape_env_class._log_guard = _log_guard


@contextlib.contextmanager
def record_shape_guards() -> Iterator[list[ShapeGuardEvent]]:
    """Collect, in a list, every shape guard and runtime assert torch adds in this thread
    while the block runs (strict, non-strict, draft export; nested blocks all receive them).
    Other threads, recording or not, are unaffected."""
    _install_guard_recorder()
    sink: list[ShapeGuardEvent] = []
    sinks = getattr(_GUARD_LOCAL, "sinks", None)
    if sinks is None:
        sinks = _GUARD_LOCAL.sinks = []
    sinks.append(sink)
    try:
        yield sink
    finally:
        for i, other in enumerate(sinks):
            if other is sink:
                del sinks[i]
                break
