"""The export warm-up's thread: ``%load_ext workbench`` starts it and returns at once.

The thread imports the exporter core and runs :func:`exporter.warmup.warm_up_quietly` (torch,
onnxscript and onnxruntime imported, the registries built, one tiny export) while the user
types the next cell. Starting it imports nothing from the core on the kernel's thread: even
``import exporter`` (≈0.25 s of small modules) happens on the warm-up thread.

Set ``ONNX_WORKBENCH_WARMUP=0`` to skip it.

The magic's first call imports the core too. It first waits for the warm-up thread to finish
importing it (:func:`wait_for_core_import`, bounded), so the two threads never import the
same package at once: the core's package ``__init__``s are lazy and its imports acyclic
(``tests/test_architecture.py``), which already makes that safe, and this keeps it so.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading

__all__ = ["WARMUP_ENV_VAR", "WARMUP_THREAD_NAME", "start_warmup", "wait_for_core_import", "warmup_enabled",
           "warmup_thread"]

WARMUP_ENV_VAR = "ONNX_WORKBENCH_WARMUP"
WARMUP_THREAD_NAME = "onnx-export-warmup"

_logger = logging.getLogger("exporter.warmup")
_lock = threading.Lock()
_thread: threading.Thread | None = None
_stopping = threading.Event()
_core_imported = threading.Event()


def warmup_enabled() -> bool:
    """False when ``ONNX_WORKBENCH_WARMUP`` is ``0``, ``false``, ``no`` or ``off``."""
    return os.environ.get(WARMUP_ENV_VAR, "1").strip().lower() not in {"0", "false", "no", "off"}


def start_warmup() -> threading.Thread | None:
    """Start the warm-up thread (once per process) and return it at once; None when disabled."""
    global _thread
    if not warmup_enabled():
        return None
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_warm_up, name=WARMUP_THREAD_NAME, daemon=True)
            _thread.start()
            atexit.register(_stop_and_wait)
        return _thread


def warmup_thread() -> threading.Thread | None:
    """The warm-up thread if one was started in this process (join it to wait for the end)."""
    return _thread


def wait_for_core_import(timeout: float = 60.0) -> bool:
    """Wait until the warm-up thread has imported the exporter core (at once when no warm-up
    runs, or when called from that thread); False if ``timeout`` seconds passed first."""
    thread = _thread
    if thread is None or threading.current_thread() is thread:
        return True
    return _core_imported.wait(timeout)


def _warm_up() -> None:
    try:
        from exporter.warmup import warm_up_quietly
    except Exception:  # a broken install shows itself on the first export, not here
        _logger.debug("warm-up: the exporter did not import", exc_info=True)
        return
    finally:
        _core_imported.set()
    warm_up_quietly(_stopping.is_set)


def _stop_and_wait() -> None:
    """At exit: stop after the current step and wait for it. A process ending while the
    thread is inside torch's import or a capture aborts ("terminate called without an active
    exception")."""
    _stopping.set()
    if _thread is not None:
        _thread.join()
