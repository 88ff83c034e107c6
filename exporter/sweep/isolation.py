"""One unit in a fresh process, with a deadline and a memory cap: what every engine's worker
calls, so the local pool and Ray enforce limits the same way."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .outcome import is_out_of_memory, package_versions, short
from .record import UnitRecord
from .resident import session_processes, session_resident_bytes
from .unit import Unit

__all__ = ["Cancelled", "Limits", "harness_failure", "run_isolated"]

GIB = 1 << 30
LOG_TAIL_CHARS = 4000
POLL_SECONDS = 0.2
# PyTorch and onnxruntime reserve more address space than they touch (0.8 GB reserved for 0.3 GB
# resident after their imports, 1.6 GB for 0.7 GB after an export): that cap is only a backstop.
ADDRESS_SPACE_FACTOR = 3


class Cancelled(Exception):
    """The unit was stopped by its cancel event (the sweep was interrupted)."""


class _PastMemory(Exception):
    """The unit's resident memory passed its cap (``args[0]``: the bytes seen)."""


@dataclass(frozen=True)
class Limits:
    """What one unit may use: ``timeout`` seconds of wall time (then it is killed and
    recorded as ``timeout``), ``memory`` bytes of resident memory (watched every
    ``POLL_SECONDS``: past it the unit is killed and recorded as ``oom``; its address space is
    capped at ``ADDRESS_SPACE_FACTOR`` times that, so one huge allocation fails at once; None:
    no cap) and ``threads`` for PyTorch and onnxruntime (one per unit keeps workers off each
    other's cores)."""

    timeout: float = 900.0
    memory: int | None = 6 * GIB
    threads: int = 1


def _environment(limits: Limits) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])  # the directory holding the exporter package
    path = os.environ.get("PYTHONPATH", "")
    threads = str(limits.threads)
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else ""), "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1"}


def _kill(process: subprocess.Popen[Any]) -> None:
    """Kill the unit's process, its process group and every process left in its session
    (it runs in a session of its own: helpers a zoo entry started, even in a process group
    of their own), then reap it. Called after every unit, however it ended: nothing a unit
    started outlives it. The unit's process is reaped last, so its id, which names the group
    and the session, cannot be reused by another process before they are killed."""
    for kill in (lambda: os.killpg(process.pid, signal.SIGKILL), process.kill):
        try:
            kill()
        except (ProcessLookupError, PermissionError, OSError):
            continue
    for pid in session_processes(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    process.wait()


def _exited(process: subprocess.Popen[Any]) -> bool:
    """Whether the unit's process ended, left unreaped (``WNOWAIT``) so that its group and
    session can still be killed by its id."""
    if not hasattr(os, "waitid"):  # pragma: no cover - Windows
        return process.poll() is not None
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped already
        return True


def _record(unit: Unit, status: str, started: float, *, stage: str | None, error: str, failure_class: str) -> UnitRecord:
    return UnitRecord(
        unit_id=unit.unit_id, zoo=unit.zoo, model=unit.model, spec=unit.spec, status=status, options=unit.options,
        stages={stage: status} if stage else {}, failed_stage=stage, failure_class=failure_class, error=short(error),
        seconds={"total": round(time.time() - started, 3)}, versions=package_versions(), source=unit.source,
        host=socket.gethostname(), started=started, finished=time.time(),
    )


def _wait(process: subprocess.Popen[Any], timeout: float, cancel: threading.Event | None, memory: int | None) -> None:
    """Wait for ``process`` up to ``timeout`` seconds (``TimeoutExpired`` after), until
    ``cancel`` is set (:class:`Cancelled`), or until the resident memory of its session passes
    ``memory`` bytes (:class:`_PastMemory`)."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise subprocess.TimeoutExpired(process.args, timeout)
        if _exited(process):
            return
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"unit process {process.pid} cancelled")
        resident = session_resident_bytes(process.pid) if memory else None
        if memory and resident is not None and resident > memory:
            raise _PastMemory(resident)
        time.sleep(min(POLL_SECONDS, remaining))


def harness_failure(unit: Unit, exc: BaseException, started: float | None = None) -> UnitRecord:
    """The record of a unit whose worker failed, not the unit (a Ray worker lost, an OS
    error starting the process): ``crashed``, with the worker's error."""
    line = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return _record(unit, "crashed", started or time.time(), stage=None, failure_class=f"worker failed ({type(exc).__name__})",
                   error=f"{type(exc).__name__}: {line}" if line else type(exc).__name__)


def run_isolated(unit: Unit, limits: Limits = Limits(), cancel: threading.Event | None = None) -> UnitRecord:
    """Run ``unit`` in a new Python process (``python -m exporter.sweep.child``) and return its
    record; a unit past its deadline is killed (``timeout``), one that dies past its memory
    cap is ``oom``, one that dies otherwise ``crashed`` (with the last line it printed).
    An interrupt (Ctrl-C, a cancelled task) or ``cancel`` being set kills the process before
    it propagates (:class:`Cancelled` for the latter)."""
    started = time.time()
    if unit.skip_reason:
        return _record(unit, "skipped", started, stage=None, error=unit.skip_reason, failure_class="skipped")
    if unit.import_error:
        from .buckets import failure_class

        return _record(unit, "build_failed", started, stage="import", error=unit.import_error,
                       failure_class=failure_class(unit.import_error) or "import failed")
    with tempfile.TemporaryDirectory(prefix="sweep-unit-") as tmp:
        folder = Path(tmp)
        (folder / "unit.json").write_text(json.dumps(unit.to_dict()))
        record_path, stage_path, log_path = folder / "record.json", folder / "stage", folder / "log"
        command = [sys.executable, "-m", "exporter.sweep.child", str(folder / "unit.json"), str(record_path),
                   str(stage_path), "--memory", str((limits.memory or 0) * ADDRESS_SPACE_FACTOR),
                   "--parent", str(os.getpid())]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=_environment(limits), start_new_session=True)
            try:
                _wait(process, limits.timeout, cancel, limits.memory)
            except subprocess.TimeoutExpired:
                _kill(process)
                stage = stage_path.read_text() if stage_path.exists() else None
                return _record(unit, "timeout", started, stage=stage, failure_class="timeout",
                               error=f"killed after {limits.timeout:g} s" + (f" in {stage}" if stage else ""))
            except _PastMemory as past:
                _kill(process)
                stage = stage_path.read_text() if stage_path.exists() else None
                return _record(unit, "oom", started, stage=stage, failure_class="out of memory",
                               error=f"killed at {past.args[0] / GIB:.1f} GiB resident, past its memory cap of "
                                     f"{(limits.memory or 0) / GIB:.1f} GiB" + (f" in {stage}" if stage else ""))
            except BaseException:
                _kill(process)
                raise
            _kill(process)  # it ended: what it started ends with it
        if record_path.exists():
            return UnitRecord.from_dict(json.loads(record_path.read_text()))
        stage = stage_path.read_text() if stage_path.exists() else None
        tail = log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        last = next((line.strip() for line in reversed(tail.splitlines()) if line.strip()), "")
        if limits.memory and (is_out_of_memory(tail) or process.returncode == -signal.SIGKILL):
            return _record(unit, "oom", started, stage=stage, failure_class="out of memory",
                           error=last or f"died past its memory cap of {limits.memory / GIB:.1f} GiB")
        return _record(unit, "crashed", started, stage=stage, failure_class=f"crashed (exit {process.returncode})",
                       error=last or f"the worker exited with {process.returncode} and no record")
