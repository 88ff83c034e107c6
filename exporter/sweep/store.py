"""A sweep's output directory: ``records.jsonl``, one record appended as each unit finishes
(so an interrupted sweep keeps what finished, and a rerun skips it), and ``records.parquet``
written at the end when pyarrow is installed."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from .record import UnitRecord

__all__ = ["RecordStore"]

RECORDS = "records.jsonl"
PARQUET = "records.parquet"


class RecordStore:
    """The records of one output directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / RECORDS

    def load(self) -> list[UnitRecord]:
        """Every record, the last one of each unit id winning (a unit rerun after its zoo
        changed replaces the old record); a torn last line (a killed sweep) is skipped."""
        if not self.path.exists():
            return []
        records: dict[str, UnitRecord] = {}
        for line in self.path.read_text().splitlines():
            try:
                record = UnitRecord.from_dict(json.loads(line))
            except (ValueError, TypeError):
                continue
            records.pop(record.unit_id, None)
            records[record.unit_id] = record
        return list(records.values())

    def append(self, record: UnitRecord) -> None:
        """Add one record, flushed to disk at once."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as out:
            out.write(json.dumps(record.to_dict()) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def write_parquet(self, records: Iterable[UnitRecord]) -> Path | None:
        """``records.parquet`` (nested fields as JSON text), or None without pyarrow."""
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            return None
        from .table import records_frame

        frame = records_frame(list(records), flat=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / PARQUET
        frame.to_parquet(path, index=False)
        return path
