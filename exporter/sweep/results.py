"""``SweepResults``: the records of a sweep as a table, failure buckets, the side-by-side with
``torch.onnx.export``, a diff against a previous run, the dashboard and the coverage page."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..presentation import Presentable
from .buckets import failure_buckets
from .record import UnitRecord, status_counts
from .store import RecordStore
from .table import records_frame

if TYPE_CHECKING:
    import pandas

    from .diff import SweepDiff

__all__ = ["SweepResults", "load_results"]

@dataclass(frozen=True, repr=False)
class SweepResults(Presentable):
    """What a sweep gave: ``records`` (one :class:`~exporter.sweep.UnitRecord` per unit, in
    plan order), ``directory`` where they are kept, ``executed`` the unit ids run by this call
    (the others were already in the directory), ``interrupted`` when it was stopped early,
    ``torn_lines`` the lines of ``records.jsonl`` that held no whole record (1-based)."""

    records: tuple[UnitRecord, ...]
    directory: str | None = None
    executed: tuple[str, ...] = ()
    interrupted: bool = False
    torn_lines: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.records)

    def record(self, model: str, spec: str = "dynamic") -> UnitRecord:
        """The record of one model (and spec)."""
        for record in self.records:
            if record.model == model and record.spec == spec:
                return record
        raise KeyError(f"no record for {model!r} ({spec})")

    def counts(self) -> dict[str, int]:
        """How many units ended in each status, best first."""
        return status_counts(self.records)

    def to_frame(self) -> pandas.DataFrame:
        """One row per unit: status, the stage and failure class of a failure, verify's
        verdict, ``torch.onnx.export``'s outcome and the comparison, timings, ONNX size."""
        return records_frame(self.records)

    def buckets(self) -> pandas.DataFrame:
        """The failures grouped by stage and root cause (:func:`~exporter.sweep.buckets.failure_class`)."""
        return failure_buckets(self.records)

    def versus_baseline(self) -> pandas.DataFrame:
        """One row per unit with a baseline: our status, ``torch.onnx.export``'s, and
        ``better`` / ``same`` / ``worse``; the ``worse`` first, then ``better``."""
        frame = self.to_frame()
        frame = frame[frame["versus"].notna()][["model", "spec", "status", "baseline", "versus", "baseline_error"]]
        order = {"worse": 0, "better": 1, "same": 2}
        return frame.sort_values("versus", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)

    def versus_counts(self) -> dict[str, int]:
        """How many units with a baseline did ``better``, the ``same`` or ``worse`` than
        ``torch.onnx.export`` (empty without a baseline)."""
        versus = Counter(r.versus for r in self.records if r.versus)
        return {k: versus[k] for k in ("better", "same", "worse")} if versus else {}

    def with_offered_patches(self) -> str | None:
        """How the failed units whose session offered model patches did with them applied:
        ``"3 of 4 failed units offered model patches pass with them (apply_suggested_fixes)"``;
        None when no failed unit was offered any."""
        offered = [r for r in self.records if r.failed and r.fixed_by]
        if not offered:
            return None
        fixed = sum(r.fixed for r in offered)
        return (f"{fixed} of {len(offered)} failed unit(s) offered model patches pass with them "
                "(session.apply_suggested_fixes())")

    def diff(self, previous: SweepResults | str | os.PathLike[str]) -> SweepDiff:
        """What changed since ``previous`` (results or their directory), regressions first."""
        from .diff import diff_results

        before = previous if isinstance(previous, SweepResults) else load_results(previous)
        return diff_results(before.records, self.records)

    def dashboard(self, path: str | os.PathLike[str] | None = None, *, title: str = "Zoo sweep") -> str:
        """The self-contained HTML dashboard (written to ``path`` when given)."""
        from .dashboard import dashboard_html

        html = dashboard_html(self.records, title=title)
        if path is not None:
            Path(path).write_text(html)
        return html

    def coverage_markdown(self, **options: Any) -> str:
        """The coverage page (:func:`~exporter.sweep.coverage.coverage_markdown`)."""
        from .coverage import coverage_markdown

        return coverage_markdown(self.records, **options)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``records.jsonl`` (and ``records.parquet`` with pyarrow) to ``directory``."""
        store = RecordStore(directory)
        if store.path.exists():
            store.path.unlink()
        for record in self.records:
            store.append(record)
        store.write_parquet(self.records)
        return store.directory


def load_results(directory: str | os.PathLike[str]) -> SweepResults:
    """The results kept in a sweep's output directory (a torn line is reported with a
    :class:`~exporter.sweep.store.SweepStoreWarning` and listed in ``torn_lines``)."""
    store = RecordStore(directory)
    records = tuple(store.load())
    return SweepResults(records, directory=str(directory), torn_lines=store.torn_lines)
