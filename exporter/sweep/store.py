"""A sweep's output directory: ``records.jsonl``, one record appended as each unit finishes
(so an interrupted sweep keeps what finished, and a rerun skips it), and ``records.parquet``
written at the end when pyarrow is installed."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .record import UnitRecord

__all__ = ["RecordStore", "SweepStoreWarning"]

RECORDS = "records.jsonl"
PARQUET = "records.parquet"


class SweepStoreWarning(UserWarning):
    """``records.jsonl`` holds a line that is not a whole record."""


def _record_of(data: Any) -> UnitRecord | None:
    try:
        return UnitRecord.from_dict(data) if isinstance(data, dict) else None
    except (TypeError, ValueError):
        return None


def _records_in(line: str) -> list[UnitRecord] | None:
    """The record a whole line holds, or None when it holds none."""
    try:
        record = _record_of(json.loads(line))
    except ValueError:
        return None
    return [record] if record is not None else None


def _salvaged(line: str) -> list[UnitRecord]:
    """The whole records inside a torn line: each ``{"unit_id"`` that starts a JSON object
    read to its end."""
    decoder = json.JSONDecoder()
    found = []
    start = line.find('{"unit_id"')
    while start >= 0:
        try:
            data, end = decoder.raw_decode(line, start)
        except ValueError:
            end = start + 1
        else:
            record = _record_of(data)
            if record is not None:
                found.append(record)
        start = line.find('{"unit_id"', end)
    return found


class RecordStore:
    """The records of one output directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / RECORDS
        self.torn_lines: tuple[int, ...] = ()  # what the last load found unreadable

    def load(self) -> list[UnitRecord]:
        """Every record, the last one of each unit id winning (a unit rerun after its zoo
        changed replaces the old record). A line that is not one whole record (a sweep killed
        while writing it) is reported with a warning and kept in :attr:`torn_lines` (1-based);
        whole records written onto it by a release that did not start a new line are read."""
        self.torn_lines = ()
        if not self.path.exists():
            return []
        records: dict[str, UnitRecord] = {}
        torn = []
        for number, line in enumerate(self.path.read_text(errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            found = _records_in(line)
            if found is None:
                torn.append(number)
                found = _salvaged(line)
            for record in found:
                records.pop(record.unit_id, None)
                records[record.unit_id] = record
        self.torn_lines = tuple(torn)
        if torn:
            warnings.warn(f"{self.path}: line(s) {', '.join(map(str, torn))} hold no whole record (a sweep killed "
                          "while writing it): a unit whose record is torn runs again on resume", SweepStoreWarning, stacklevel=2)
        return list(records.values())

    def append(self, record: UnitRecord) -> None:
        """Add one record on a line of its own (after a newline when the file does not end
        with one: the torn last line of a killed sweep), flushed to disk at once."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as out:
            line = (json.dumps(record.to_dict()) + "\n").encode()
            if out.seek(0, os.SEEK_END):
                out.seek(-1, os.SEEK_END)
                if out.read(1) != b"\n":
                    line = b"\n" + line
            out.write(line)  # "a" mode: at the end, wherever the file position is
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
