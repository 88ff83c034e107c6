"""The worker process of one unit: ``python -m exporter.sweep.child UNIT.json RECORD.json
STAGE_FILE [--memory BYTES]``. Caps its own address space (a backstop: the parent watches
resident memory), exits when its parent dies, adopts the helpers its unit starts, runs the
unit, writes its record and ends those helpers. Started by
:func:`exporter.sweep.isolation.run_isolated`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

__all__ = ["main"]

WATCH_SECONDS = 0.5


def cap_memory(limit: int | None) -> None:
    """Limit this process's address space to ``limit`` bytes (``RLIMIT_AS``): an allocation
    past it fails (``MemoryError``, or PyTorch's "can't allocate memory") instead of taking
    the machine down. The parent caps resident memory, a few times lower; this is the
    backstop. Not available on Windows, where the cap is not applied."""
    if not limit:
        return
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def exit_with_parent(parent: int) -> None:
    """End this process when its parent goes (a killed engine worker, a cancelled Ray task):
    a unit never outlives the sweep that started it."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_SECONDS)
        os._exit(3)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def adopt_orphans() -> None:
    """Make this process the one a helper is handed to when its parent ends
    (``PR_SET_CHILD_SUBREAPER``), instead of init: a helper a zoo entry started in a session
    of its own stays below this process, where :func:`end_descendants` finds it. Linux only."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the parent still kills the unit's session
        return


def end_descendants() -> None:
    """Kill every process below this one (helpers a zoo entry left running) and reap them."""
    import signal

    from .resident import descendants

    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # none left
            return
        if pid == 0:
            time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exporter.sweep.child")
    parser.add_argument("unit")
    parser.add_argument("record")
    parser.add_argument("stage_file")
    parser.add_argument("--memory", type=int, default=0)
    parser.add_argument("--parent", type=int, default=0)
    options = parser.parse_args(argv)
    exit_with_parent(options.parent or os.getppid())
    cap_memory(options.memory)
    adopt_orphans()

    from .runner import run_unit
    from .unit import Unit

    unit = Unit.from_dict(json.loads(Path(options.unit).read_text()))
    stage_file = Path(options.stage_file)

    def report(stage: str) -> None:
        stage_file.write_text(stage)

    try:
        record = run_unit(unit, report=report)
        partial = Path(options.record + ".partial")
        partial.write_text(json.dumps(record.to_dict()))
        partial.replace(options.record)
    finally:
        end_descendants()
    return 0


if __name__ == "__main__":
    sys.exit(main())
