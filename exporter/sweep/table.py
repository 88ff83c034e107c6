"""Records as a table: one ``pandas.DataFrame`` row per unit."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .record import UnitRecord

if TYPE_CHECKING:
    import pandas

__all__ = ["COLUMNS", "records_frame"]

COLUMNS = ["unit_id", "zoo", "model", "spec", "status", "failed_stage", "failure_class", "error", "verdict",
           "baseline", "baseline_error", "versus", "fixed_by", "fixed_status", "seconds", "onnx_bytes", "speedup", "stages", "options", "versions", "host",
           "started", "finished"]


def records_frame(records: Sequence[UnitRecord], flat: bool = False) -> pandas.DataFrame:
    """One row per record; ``seconds`` is the unit's total. ``flat``: the dict and list columns
    (``stages``, ``options``, ``versions``, ``fixed_by``) as JSON text, as Parquet stores them."""
    import pandas

    rows = []
    for record in records:
        row = record.to_dict()
        row["seconds"] = record.seconds.get("total")
        if flat:
            for name in ("stages", "options", "versions", "fixed_by"):
                row[name] = json.dumps(row[name], sort_keys=True)
        rows.append({name: row.get(name) for name in COLUMNS})
    return pandas.DataFrame(rows, columns=COLUMNS)
