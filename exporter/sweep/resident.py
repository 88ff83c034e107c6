"""A unit's processes, read from ``/proc``: their resident memory (what the sweep's memory cap
is measured in), and which they are (what the sweep kills after each unit).

An address-space cap (``RLIMIT_AS``) counts what PyTorch and onnxruntime reserve, not what they
use: a unit whose resident memory stayed near 3 GB failed its allocations under a 6 GiB
address-space cap. The sweep watches resident memory instead and keeps a looser address-space
cap as a backstop against one huge allocation (:mod:`exporter.sweep.isolation`).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["descendants", "session_processes", "session_resident_bytes"]

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _session_of(stat: str) -> int:
    """The session id in a ``/proc/PID/stat`` line (the command name may hold spaces and
    parentheses: the fields are read after its last ``)``)."""
    return int(stat[stat.rindex(")") + 2:].split()[3])


def _stats() -> list[tuple[int, str]]:
    """``(pid, /proc/PID/stat line)`` of every process (those ending while read left out)."""
    found = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            try:
                found.append((int(entry.name), (entry / "stat").read_text()))
            except OSError:
                continue
    return found


def session_processes(session: int) -> list[int]:
    """The processes of session ``session`` (a unit's process and what it started, unless it
    started a session of its own); empty where ``/proc`` cannot tell (not Linux)."""
    if not (_PROC / "self" / "stat").exists():
        return []
    out = []
    for pid, stat in _stats():
        try:
            if _session_of(stat) == session:
                out.append(pid)
        except (ValueError, IndexError):
            continue
    return out


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children first); empty where ``/proc`` cannot tell."""
    if not (_PROC / "self" / "stat").exists():
        return []
    children: dict[int, list[int]] = {}
    for child, stat in _stats():
        try:
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(child)
        except (ValueError, IndexError):
            continue
    found, queue = [], list(children.get(pid, ()))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, ()))
    return found


def session_resident_bytes(session: int) -> int | None:
    """The resident memory of every process in session ``session`` (a unit's process and
    anything it started), or None where ``/proc`` cannot tell (not Linux)."""
    if not (_PROC / "self" / "statm").exists():
        return None
    total = 0
    for pid in session_processes(session):
        try:
            total += int((_PROC / str(pid) / "statm").read_text().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):  # the process ended while being read
            continue
    return total
