"""A sweep against a previous one: which units got worse (regressions, listed first), better,
changed how they fail, appeared or went."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..presentation import Presentable
from .record import UnitRecord

if TYPE_CHECKING:
    import pandas

__all__ = ["KINDS", "DiffRow", "SweepDiff", "diff_results"]

#: What happened to a unit, in the order a diff lists them.
KINDS = ("regression", "fixed", "changed", "new", "gone")

# How good a status is: a unit moving down this scale is a regression.
_RANK = {"passed": 4, "not_verified": 3, "exported": 3, "verify_failed": 2, "export_failed": 1, "build_failed": 1,
         "timeout": 0, "oom": 0, "crashed": 0}


@dataclass(frozen=True)
class DiffRow:
    """One unit that differs: its status ``before`` and ``after`` (None when absent from that
    run), ``kind`` (one of :data:`KINDS`) and the new error (or the old one when ``gone``)."""

    unit_id: str
    model: str
    spec: str
    kind: str
    before: str | None
    after: str | None
    error: str | None = None


@dataclass(frozen=True, repr=False)
class SweepDiff(Presentable):
    """The units that differ between two sweeps, regressions first; ``unchanged`` counts the rest."""

    rows: tuple[DiffRow, ...]
    unchanged: int = 0

    @property
    def regressions(self) -> tuple[DiffRow, ...]:
        return tuple(r for r in self.rows if r.kind == "regression")

    def to_frame(self) -> pandas.DataFrame:
        import pandas

        columns = ["kind", "model", "spec", "before", "after", "error", "unit_id"]
        return pandas.DataFrame([{c: getattr(r, c) for c in columns} for r in self.rows], columns=columns)

    def counts(self) -> dict[str, int]:
        """How many units of each kind (:data:`KINDS`, in order) differ."""
        return {kind: sum(r.kind == kind for r in self.rows) for kind in KINDS}


def _kind(before: UnitRecord | None, after: UnitRecord | None) -> str | None:
    if before is None:
        return "new"
    if after is None:
        return "gone"
    a, b = _RANK.get(before.status), _RANK.get(after.status)
    if a is not None and b is not None and b < a:
        return "regression"
    if a is not None and b is not None and b > a:
        return "fixed"
    if (before.status, before.failure_class, before.versus) != (after.status, after.failure_class, after.versus):
        return "changed"
    return None


def diff_results(before: Sequence[UnitRecord], after: Sequence[UnitRecord]) -> SweepDiff:
    """Compare two sweeps' records unit by unit (by unit id)."""
    old = {r.unit_id: r for r in before}
    new = {r.unit_id: r for r in after}
    rows, unchanged = [], 0
    for unit_id in [*new, *(u for u in old if u not in new)]:
        a, b = old.get(unit_id), new.get(unit_id)
        kind = _kind(a, b)
        if kind is None:
            unchanged += 1
            continue
        record = b or a
        assert record is not None
        rows.append(DiffRow(unit_id, record.model, record.spec, kind, a.status if a else None, b.status if b else None,
                            record.error))
    rows.sort(key=lambda r: KINDS.index(r.kind))
    return SweepDiff(tuple(rows), unchanged)
