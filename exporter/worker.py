"""The export worker: one background thread per process for everything that runs torch.

torch.export (fake tensors, the ShapeEnv, dynamo) is not safe to run in two threads at once, so
background work is queued on a single thread; a notebook kernel stays free to answer its front
end while a capture runs. Jobs run in submission order, each in a copy of the submitter's
:mod:`contextvars` context (a thread does not inherit it): what a job switches on for itself
(:func:`exporter.compat.shared_patch`) stays in that job.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["submit_work", "WORKER_THREAD_NAME"]

WORKER_THREAD_NAME = "onnx-export-worker"

_executor: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def submit_work(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
    """Queue ``fn(*args, **kwargs)`` on the export worker, to run in a copy of the caller's
    context, and return its ``Future``."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=WORKER_THREAD_NAME)
        return _executor.submit(contextvars.copy_context().run, fn, *args, **kwargs)
