"""A stage that runs long says so while it runs.

A capture or decomposition of a large model can take minutes (Qwen3-Next: past five), and a
notebook cell that prints nothing for that long looks hung. While a stage runs, a timer thread
tells the observers every :data:`NOTE_EVERY` seconds how long it has run (the widget's job bar,
the command line's progress bar), and past :data:`BUDGET` seconds logs one warning (printed
under a plain ``export()`` call, where no observer listens) naming the stage and how to stop it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

from ..events import Observer

__all__ = ["BUDGET", "NOTE_EVERY", "running_note", "watched"]

NOTE_EVERY = 30.0
BUDGET = 120.0

_log = logging.getLogger("exporter")


def running_note(stage: str, seconds: float, budget: float | None = None) -> str:
    """What the observers hear after ``seconds`` of ``stage``."""
    budget = BUDGET if budget is None else budget
    past = f", past its {budget:.0f} s budget" if seconds >= budget else ""
    return f"{stage} has run for {seconds:.0f} s{past}; still working (Cancel or Ctrl+C stops it)"


@contextlib.contextmanager
def watched(stage: str, observer: Observer, *, every: float | None = None, budget: float | None = None) -> Iterator[None]:
    """While the block runs, ``observer`` hears :func:`running_note` every ``every`` seconds
    as a progress note of ``stage`` without a count (``total`` 0: how far it is is unknown),
    and one warning is logged once it passes ``budget``. Nothing happens for a block shorter
    than ``every``."""
    every = NOTE_EVERY if every is None else every
    budget = BUDGET if budget is None else budget
    done = threading.Event()
    start = time.perf_counter()

    def watch() -> None:
        warned = False
        while not done.wait(every):
            seconds = time.perf_counter() - start
            try:
                observer.on_progress(stage, 0.0, 0.0, running_note(stage, seconds, budget))
            except Exception:  # noqa: BLE001 - an observer that fails must not stop the watch
                _log.debug("observer failed in on_progress", exc_info=True)
            if seconds >= budget and not warned:
                warned = True
                _log.warning("%s has run for %.0f s, past its %.0f s budget; it is still working. Cancel the job "
                             "(or press Ctrl+C) to stop it", stage, seconds, budget)

    thread = threading.Thread(target=watch, name=f"watch-{stage}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
