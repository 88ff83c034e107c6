"""Progress reports: what long-running work (verify, benchmark, profile) tells a progress bar."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Progress", "report"]


@dataclass(frozen=True)
class Progress:
    """One progress report: ``done`` of ``total`` steps of ``task`` (a progress bar's value)."""

    task: str
    done: float
    total: float
    message: str = ""

    @property
    def fraction(self) -> float:
        return 0.0 if self.total <= 0 else min(1.0, max(0.0, self.done / self.total))


def report(callback: Callable[[Progress], Any] | None, task: str, done: float, total: float, message: str = "") -> None:
    if callback is None:
        return
    try:
        callback(Progress(task, done, total, message))
    except Exception:  # noqa: BLE001 - a broken progress bar must not stop the work
        pass
