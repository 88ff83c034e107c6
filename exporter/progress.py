"""Progress reports: what long-running work (verify, benchmark, profile) tells a ``progress=``
callback. The work reports to an :class:`~exporter.events.Observer`; a ``progress=`` callback
hears it through :class:`~exporter.events.Reporter`, which hands it a :class:`Progress`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Progress"]


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

