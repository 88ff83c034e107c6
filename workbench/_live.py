"""Background jobs of the workbench widget: chains of steps on the export worker, cancellable,
superseded by newer ones, and the observer that forwards their events to the widget.

The job in hand is kept by the one job machine every widget of the project uses
(:class:`workbench.worker_jobs.JobSlot`): a :class:`Job` is its ``WorkerJob`` with steps, and
:class:`JobRunner` adds the chaining.

A *job* is a short chain of :class:`Step` s (``capture``, ``optimize``, ``verify``,
``benchmark``, ``fixes``...) on one session. Each step is handed to the exporter core
(``session.submit(...)`` for the stages and analyses, the core's export worker for the rest),
so the kernel thread only queues work and returns at once. When a step ends, its result is
passed to the widget (on the worker thread) and the next step is queued. Starting a job
supersedes the running one: its token is cancelled and its later results are ignored.

Nothing here computes a number: it forwards what the core returns.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from exporter.events import CancelToken, Observer
from exporter.worker import submit_work

from .worker_jobs import JobSlot, WorkerJob

if TYPE_CHECKING:
    from exporter.pipeline.capture import CaptureAttempt
    from exporter.pipeline.stage import StageResult
    from exporter.session import Session

__all__ = ["Job", "JobRunner", "JobSink", "Step", "WidgetObserver"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    """One step of a job: a pipeline stage (``capture`` ... ``optimize``), an analysis
    (``verify``, ``benchmark``, ``benchmark_sweep``, ``profile``) with its ``options``, or one
    of the widget's own tasks (``fixes``: apply the suggested fixes; ``save``; ``graphs``)."""

    task: str
    options: Mapping[str, Any] = field(default_factory=dict)


class Job(WorkerJob):
    """A chain of steps on one session. ``previous`` is the session shown before the job
    started (what a Cancel puts back)."""

    _counter = 0

    def __init__(self, session: Session, steps: tuple[Step, ...], label: str, previous: Session) -> None:
        super().__init__()
        Job._counter += 1
        self.number = Job._counter
        self.session = session
        self.steps = steps
        self.label = label
        self.previous = previous
        self.index = 0
        self.problem: str | None = None  # set when a step could not be shown or run (the job bar says it)
        self.started = time.perf_counter()

    @property
    def step(self) -> Step | None:
        return self.steps[self.index] if self.index < len(self.steps) else None

    def __repr__(self) -> str:
        return f"Job#{self.number}({self.label!r}, step {self.index + 1}/{len(self.steps)})"


class JobRunner:
    """Runs one job at a time through the export worker; a new job supersedes the current one.

    ``submit_step(session, step, observer, cancel) -> Future`` hands a step to the core;
    ``on_step(job, step, result) -> bool`` receives its result (on the worker thread) and
    says whether to go on; ``on_finish(job)`` is called once when a job ends (finished,
    failed, cancelled or superseded); ``observer_for(job)`` gives the observer for its steps.
    """

    def __init__(
        self,
        submit_step: Callable[[Session, Step, Observer, CancelToken], Future[Any]],
        on_step: Callable[[Job, Step, Any], bool],
        on_finish: Callable[[Job], None],
        observer_for: Callable[[Job], Observer],
    ) -> None:
        self._submit_step = submit_step
        self._on_step = on_step
        self._on_finish = on_finish
        self._observer_for = observer_for
        self._lock = threading.RLock()
        self._slot: JobSlot[Job] = JobSlot(self._lock)
        self._active: set[Job] = set()  # the current job and cancelled ones still finishing
        self._beside = 0  # work queued with beside() and not yet done
        self._idle = threading.Event()
        self._idle.set()

    @property
    def current(self) -> Job | None:
        """The job whose results the widget shows (None when idle or after a Cancel)."""
        return self._slot.job

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    def is_current(self, job: Job) -> bool:
        return self._slot.is_current(job)

    def start(self, session: Session, steps: tuple[Step, ...], label: str, previous: Session) -> Job:
        """Cancel the current job (its results will be ignored) and queue a new one."""
        job = Job(session, tuple(steps), label, previous)
        with self._lock:
            self._slot.replace(job)
            self._active.add(job)
            self._idle.clear()
        self._queue(job)
        return job

    def beside(self, work: Callable[[], Any]) -> None:
        """Run ``work`` on the export worker after what is queued, without cancelling the
        current job (drawing a tab's charts); :meth:`wait` waits for it too."""
        with self._lock:
            self._beside += 1
            self._idle.clear()

        def run() -> None:
            try:
                work()
            except Exception:  # noqa: BLE001
                _log.exception("workbench: %r failed", work)
            finally:
                with self._lock:
                    self._beside -= 1
                    self._set_idle_if_done()

        submit_work(run)

    def cancel(self) -> Job | None:
        """Cancel the current job; return it (None if there was none). It finishes in the
        background, its later events and results ignored."""
        return self._slot.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no job runs (the current one and any cancelled one still finishing)."""
        return self._idle.wait(timeout)

    def _set_idle_if_done(self) -> None:
        if not self._active and not self._beside:
            self._idle.set()

    # -- chaining ----------------------------------------------------------------------------
    def _queue(self, job: Job) -> None:
        step = job.step
        if step is None or job.cancelled:
            self._finish(job)
            return
        try:
            future = self._submit_step(job.session, step, self._observer_for(job), job.token)
        except Exception as exc:  # noqa: BLE001 - a refused step is shown, never raised into the UI
            self._deliver(job, step, exc)
            return
        future.add_done_callback(functools.partial(self._done, job, step))

    def _done(self, job: Job, step: Step, future: Future[Any]) -> None:
        try:
            result = future.result()
        except BaseException as exc:  # noqa: BLE001 - the core returns failures as data; this is a bug path
            result = exc
        self._deliver(job, step, result)

    def _deliver(self, job: Job, step: Step, result: Any) -> None:
        go_on = False
        try:
            if self.is_current(job):
                go_on = bool(self._on_step(job, step, result))
        except Exception:  # noqa: BLE001 - a renderer never kills the job chain
            _log.exception("workbench: showing the result of %s failed", step.task)
        if go_on and self.is_current(job):
            job.index += 1
            self._queue(job)
        else:
            self._finish(job)

    def _finish(self, job: Job) -> None:
        try:
            self._on_finish(job)
        except Exception:  # noqa: BLE001
            _log.exception("workbench: finishing %r failed", job)
        finally:
            with self._lock:
                self._active.discard(job)
                self._slot.finish(job)
                self._set_idle_if_done()
            job.done.set()


class JobSink(Protocol):
    """What hears a job's events (the widget), each given the job it belongs to. Called on the
    worker thread; the sink drops the events of a job that is no longer current."""

    def stage_started(self, job: Job, stage: str) -> None: ...

    def stage_ended(self, job: Job, result: StageResult) -> None: ...

    def attempt_made(self, job: Job, attempt: CaptureAttempt) -> None: ...

    def analysis_started(self, job: Job, name: str) -> None: ...

    def analysis_ended(self, job: Job, name: str, result: Any) -> None: ...

    def progress_made(self, job: Job, task: str, done: float, total: float, note: str = "") -> None: ...


class WidgetObserver(Observer):
    """An :class:`exporter.events.Observer` that forwards one job's events to the widget
    (``sink``) while the job is the current one. Progress updates are throttled to one per
    ``interval`` seconds (the last one of a task always passes). The core shields the work
    from an observer that raises: a display problem never stops an export."""

    def __init__(self, runner: JobRunner, job: Job, sink: JobSink, interval: float = 0.05) -> None:
        self.runner = runner
        self.job = job
        self.sink = sink
        self.interval = interval
        self._last = 0.0

    def on_stage_start(self, stage: str) -> None:
        if self.runner.is_current(self.job):
            self.sink.stage_started(self.job, stage)

    def on_stage_end(self, result: StageResult) -> None:
        if self.runner.is_current(self.job):
            self.sink.stage_ended(self.job, result)

    def on_attempt(self, attempt: CaptureAttempt) -> None:
        if self.runner.is_current(self.job):
            self.sink.attempt_made(self.job, attempt)

    def on_analysis_start(self, name: str) -> None:
        if self.runner.is_current(self.job):
            self.sink.analysis_started(self.job, name)

    def on_analysis_end(self, name: str, result: Any) -> None:
        if self.runner.is_current(self.job):
            self.sink.analysis_ended(self.job, name, result)

    def on_progress(self, task: str, done: float, total: float, note: str = "") -> None:
        now = time.perf_counter()
        if now - self._last < self.interval and done < total:
            return
        self._last = now
        if self.runner.is_current(self.job):
            self.sink.progress_made(self.job, task, done, total, note)
