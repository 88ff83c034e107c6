"""What long work tells the outside world, and how the outside world stops it.

Everything long in the exporter (the stages, verify, benchmark, the sweep, the profile) takes
two keywords: ``observer=`` an :class:`Observer` that hears each step as it happens, and
``cancel=`` a :class:`CancelToken` checked between steps (between stages, capture strategies,
verify cases and timing batches). Every stage and every analysis has a start and an end event;
progress in between goes to the same observer (a ``progress=`` callback, where an analysis
takes one, is wrapped into an observer). A widget, a progress bar and a logger are all
observers::

    token = CancelToken()
    future = session.submit(until="optimize", observer=MyObserver(), cancel=token)
    token.cancel()                    # from a button callback: stops at the next step
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .progress import Progress

if TYPE_CHECKING:
    from .pipeline.records import CaptureAttempt, StageResult

__all__ = ["CancelToken", "Cancelled", "LoggerObserver", "Observer", "ProgressBarObserver", "Reporter", "fan_out"]

_log = logging.getLogger(__name__)


class Cancelled(BaseException):
    """Raised inside long work when its :class:`CancelToken` was set. A ``BaseException``
    (like ``KeyboardInterrupt``) so that no ``except Exception`` on the way turns a cancel into
    a failure; the entry points catch it and return a result whose status is ``cancelled``."""


class CancelToken:
    """A flag the work checks between steps. Thread-safe; once set it stays set."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` if the token was set."""
        if self._event.is_set():
            raise Cancelled()

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled})"


class Observer:
    """Hears the steps of long work. Override what you need; every method defaults to nothing.

    Called on the thread doing the work (the export worker for :meth:`Session.submit`): a UI
    must marshal updates to its own thread or use thread-safe widgets. An observer that raises
    is logged and otherwise ignored: a broken progress bar never stops an export.
    """

    def on_stage_start(self, stage: str) -> None:
        """A pipeline stage (``capture`` ... ``optimize``) begins."""

    def on_stage_end(self, result: StageResult) -> None:
        """A pipeline stage ended (ok, failed, skipped, cancelled, or served from cache)."""

    def on_analysis_start(self, name: str) -> None:
        """An analysis of the exported model (``verify``, ``benchmark``, ``benchmark_sweep``,
        ``profile``, ``compare``, ``compare_intermediates``, ``bisect_passes``) begins."""

    def on_analysis_end(self, name: str, result: Any) -> None:
        """An analysis ended: ``result`` is what it returns (its ``status`` says passed, failed,
        cancelled...), or the exception it raised (an invalid argument)."""

    def on_attempt(self, attempt: CaptureAttempt) -> None:
        """One capture strategy was tried (or skipped)."""

    def on_progress(self, task: str, done: float, total: float, note: str = "") -> None:
        """``done`` of ``total`` steps of ``task`` (``verify``, ``onnxruntime``, ``eager``,
        ``sweep``, ``profile``). ``total`` 0: only ``note`` is news (a stage still running after
        30 s, named by the stage: :mod:`exporter.pipeline.watch`)."""


class _FanOut(Observer):
    def __init__(self, observers: Iterable[Observer]) -> None:
        self.observers = tuple(observers)

    def _each(self, method: str, *args: Any) -> None:
        for observer in self.observers:
            try:
                getattr(observer, method)(*args)
            except Exception:  # noqa: BLE001 - an observer must never break the work
                _log.exception("observer %r failed in %s", observer, method)

    def on_stage_start(self, stage: str) -> None:
        self._each("on_stage_start", stage)

    def on_stage_end(self, result: StageResult) -> None:
        self._each("on_stage_end", result)

    def on_analysis_start(self, name: str) -> None:
        self._each("on_analysis_start", name)

    def on_analysis_end(self, name: str, result: Any) -> None:
        self._each("on_analysis_end", name, result)

    def on_attempt(self, attempt: CaptureAttempt) -> None:
        self._each("on_attempt", attempt)

    def on_progress(self, task: str, done: float, total: float, note: str = "") -> None:
        self._each("on_progress", task, done, total, note)


def fan_out(*observers: Observer | None) -> Observer:
    """One observer that forwards to each given one (``None`` entries are dropped) and
    shields the work from any that raises."""
    return _FanOut(o for o in observers if o is not None)


class LoggerObserver(Observer):
    """One log record per stage and per analysis: what ``ExportOptions(logger=...)`` gives."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def on_stage_end(self, result: StageResult) -> None:
        suffix = " (cached)" if result.cached else ""
        if result.library_output and not result.cached:
            self.logger.debug("%s: torch and onnxscript printed:\n%s", result.name, result.library_output.rstrip())
        if result.status == "failed":
            self.logger.error("%s failed after %.2f s%s\n%s", result.name, result.seconds, suffix, result.error)
            return
        detail = f": {result.detail}" if result.detail else ""
        self.logger.info("%s %s in %.2f s%s%s", result.name, result.status, result.seconds, suffix, detail)

    def on_analysis_end(self, name: str, result: Any) -> None:
        if isinstance(result, BaseException):
            self.logger.error("%s raised %s: %s", name, type(result).__name__, result)
        else:
            self.logger.info("%s %s in %.2f s", name, result.status, result.seconds)


class ProgressBarObserver(Observer):
    """A progress bar per task through ``tqdm.auto``: a text bar in a terminal, a widget bar in
    Jupyter. Stage ends print one line each (to ``stream``, stderr by default)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream
        self._bars: dict[str, Any] = {}

    def on_stage_end(self, result: StageResult) -> None:
        stream = self.stream or sys.stderr
        cached = ", cached" if result.cached else ""
        print(f"{result.name}: {result.status} in {result.seconds:.2f} s{cached}", file=stream)

    def on_progress(self, task: str, done: float, total: float, note: str = "") -> None:
        if total <= 0:  # no count, only a note (a stage still running): one line
            print(f"{task}: {note}", file=self.stream or sys.stderr)
            return
        from tqdm.auto import tqdm

        bar = self._bars.get(task)
        if bar is None:
            bar = self._bars[task] = tqdm(total=float(total), desc=task, file=self.stream, leave=False,
                                          bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}")
        bar.n = min(float(done), float(total))
        bar.set_postfix_str(note, refresh=False)
        bar.refresh()
        if done >= total:
            bar.close()
            del self._bars[task]

    def on_analysis_end(self, name: str, result: Any) -> None:
        for bar in self._bars.values():  # a cancelled or failed analysis leaves no bar behind
            bar.close()
        self._bars.clear()


class Reporter:
    """The observer and cancel token of one call, bundled for the code doing the work.

    ``reporter.progress(...)`` checks the token first, so every progress point is also a
    cancel point. A ``progress=`` callback (taking a :class:`~exporter.progress.Progress`) is
    one more observer: progress flows one way, from the work to the observers.
    """

    def __init__(self, observer: Observer | None = None, cancel: CancelToken | None = None,
                 progress: Callable[[Progress], Any] | None = None) -> None:
        observers: list[Observer] = [observer] if observer is not None else []
        if progress is not None:
            observers.append(_ProgressCallback(progress))
        self.observer: Observer = observers[0] if len(observers) == 1 else fan_out(*observers)
        self.cancel = cancel

    def check(self) -> None:
        if self.cancel is not None:
            self.cancel.check()

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.cancelled

    def progress(self, task: str, done: float, total: float, note: str = "") -> None:
        self.check()
        try:
            self.observer.on_progress(task, done, total, note)
        except Exception:  # noqa: BLE001
            _log.exception("observer failed in on_progress")

    def scaled(self, task: str, offset: float, scale: float, total: float, prefix: str = "",
               phases: tuple[str, ...] = ("onnxruntime", "eager")) -> Reporter:
        """A reporter whose progress lands in ``[offset, offset + scale]`` of ``task``'s
        ``total`` (a sub-step of a longer run, such as one size of a sweep). Sub-tasks named in
        ``phases`` run one after the other and share that span equally."""
        parent = self

        class _Scaled(Observer):
            def on_progress(self, sub_task: str, done: float, sub_total: float, note: str = "") -> None:
                fraction = 0.0 if sub_total <= 0 else min(1.0, max(0.0, done / sub_total))
                if sub_task in phases:
                    fraction = (phases.index(sub_task) + fraction) / len(phases)
                parent.progress(task, offset + fraction * scale, total, f"{prefix}{sub_task} {note}".strip())

        return Reporter(_Scaled(), self.cancel)


class _ProgressCallback(Observer):
    """A ``progress=`` callback as an observer: it hears progress only."""

    def __init__(self, callback: Callable[[Progress], Any]) -> None:
        self.callback = callback

    def on_progress(self, task: str, done: float, total: float, note: str = "") -> None:
        self.callback(Progress(task, done, total, note))
