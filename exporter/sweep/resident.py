"""Resident memory of a unit's processes: what the sweep's memory cap is measured in.

An address-space cap (``RLIMIT_AS``) counts what PyTorch and onnxruntime reserve, not what they
use: a unit whose resident memory stayed near 3 GB failed its allocations under a 6 GiB
address-space cap. The sweep watches resident memory instead and keeps a looser address-space
cap as a backstop against one huge allocation (:mod:`exporter.sweep.isolation`).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["session_resident_bytes"]

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _session_of(stat: str) -> int:
    """The session id in a ``/proc/PID/stat`` line (the command name may hold spaces and
    parentheses: the fields are read after its last ``)``)."""
    return int(stat[stat.rindex(")") + 2:].split()[3])


def session_resident_bytes(session: int) -> int | None:
    """The resident memory of every process in session ``session`` (a unit's process and
    anything it started), or None where ``/proc`` cannot tell (not Linux)."""
    if not (_PROC / "self" / "statm").exists():
        return None
    total = 0
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if _session_of((entry / "stat").read_text()) != session:
                continue
            total += int((entry / "statm").read_text().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):  # the process ended while being read
            continue
    return total
