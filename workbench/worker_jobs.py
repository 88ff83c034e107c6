"""A widget's background job on the export worker: at most one at a time, the newest wins.

The Workbench runs its stages and analyses there (:class:`workbench._live.JobRunner` chains
their steps over a slot), the graph widget computes its overlays there and the Passes view
replays and lays out a pass there, so the kernel keeps answering the page meanwhile. All three
follow one protocol, kept here:

- :meth:`JobSlot.replace` cancels the job running (its result is then ignored) and makes the
  new one current; the widget says so in its traits under the same lock;
- :meth:`JobSlot.submit` runs it on the worker, or at once when the caller already is the
  worker (a Workbench renderer): waiting for itself would deadlock;
- the job's work checks ``job.token``; when it ends, :meth:`JobSlot.finish` tells whether it
  was still current (its drawing then stays and its ``computing`` trait is cleared);
- :meth:`JobSlot.wait` waits for the current job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from exporter.events import CancelToken
from exporter.worker import WORKER_THREAD_NAME, submit_work

__all__ = ["JobSlot", "WorkerJob"]


@dataclass(kw_only=True, eq=False)
class WorkerJob:
    """How to stop a job (``token``), when it is over (``done``), and whether it was stopped
    or replaced (``cancelled``). Jobs are compared by identity."""

    token: CancelToken = field(default_factory=CancelToken)
    done: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False


J = TypeVar("J", bound=WorkerJob)


class JobSlot(Generic[J]):
    """The one job of a widget (see the module docstring). ``lock``: the widget's own, which
    its drawings also take, so a late job and a page message never interleave."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.job: J | None = None

    def replace(self, job: J) -> None:
        """Cancel the current job and make ``job`` current."""
        with self._lock:
            self.cancel()
            self.job = job

    def cancel(self) -> J | None:
        """Forget the current job and tell it to stop; returns it (None when there was none)."""
        with self._lock:
            job, self.job = self.job, None
        if job is not None:
            job.cancelled = True
            job.token.cancel()
        return job

    def submit(self, run: Callable[..., None], job: J, *args: Any) -> None:
        """``run(job, *args)`` on the export worker (inline when this is the worker)."""
        if threading.current_thread().name.startswith(WORKER_THREAD_NAME):
            run(job, *args)
        else:
            submit_work(run, job, *args)

    def is_current(self, job: J) -> bool:
        """Whether ``job`` is still the one asked for (call under the lock)."""
        return self.job is job and not job.cancelled

    def finish(self, job: J) -> bool:
        """``job`` ended: forget it if it is current; returns whether it was."""
        with self._lock:
            if self.job is not job:
                return False
            self.job = None
            return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the current job is over; False on timeout."""
        job = self.job
        return job is None or job.done.wait(timeout)
