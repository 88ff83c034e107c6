"""``UnitRecord``: what one unit of a sweep gave, a plain record (one JSON line, one table row)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["FAILED", "STATUSES", "UnitRecord", "status_counts", "zoo_counts"]

#: A record's ``status``, best first: ``passed`` (exported, ONNX matches eager PyTorch at the
#: example and at other sizes), ``not_verified`` (exported, some dim never compared at another
#: size), ``exported`` (exported, verify not asked for), ``verify_failed`` (exported, wrong
#: numbers or onnxruntime failed at some size), ``export_failed``, ``build_failed`` (the
#: zoo file did not import, the factory raised, or the eager call on the example inputs raised
#: or gave outputs that cannot be flattened), ``timeout``, ``oom`` (past the
#: memory cap), ``crashed`` (the worker died without a record), ``skipped`` (not run: its zoo
#: cannot load here, see ``error``).
STATUSES = ("passed", "not_verified", "exported", "verify_failed", "export_failed", "build_failed",
            "timeout", "oom", "crashed", "skipped")
#: The statuses that count as failures.
FAILED = frozenset(("verify_failed", "export_failed", "build_failed", "timeout", "oom", "crashed"))


@dataclass(frozen=True)
class UnitRecord:
    """One unit's outcome.

    ``stages``: status per stage as it ran (``import`` for a zoo file that did not import,
    ``build``, ``eager``, ``capture``, ``decompose``, ``translate``, ``optimize``, ``verify``,
    ``benchmark``, ``baseline``); ``failed_stage`` the first that failed (for a ``timeout``,
    ``oom`` or ``crashed`` unit, the stage it was in; an error of the sweep's own code is
    recorded at the stage it was in, after the export without changing the status);
    ``failure_class`` the error's first line with names and numbers taken out (the bucket it
    falls in, :func:`exporter.sweep.buckets.failure_class`); ``error`` its first line as
    raised. ``verdict`` is verify's one-line verdict. ``baseline``: what ``torch.onnx.export``
    gave on the same call (``passed``: matched eager at the example and the sizes verify
    compared, or at the example with every named dim one larger when verify did not run;
    ``example_only``: matched at the example, no other size compared; ``verify_failed``;
    ``export_failed``), and ``versus`` compares it with ours: ``better``, ``same`` or
    ``worse``, ranking wrong numbers without an error below a failed export, and a model right
    wherever onnxruntime runs it (it raises at some size) above one
    (:func:`exporter.sweep.outcome.rank`). ``seconds`` per stage and in all (``total``), ``onnx_bytes`` the
    size of our ONNX model, ``speedup`` onnxruntime vs eager when benchmarked, ``versions``
    the packages that ran it and those the model's classes come from (``diffusers``),
    ``host`` and ``pid`` where, ``started`` / ``finished`` when (Unix time). ``fixed_by``: the model patches a failed unit's session offered as fixes
    (:attr:`exporter.Session.suggested_fixes`), and ``fixed_status`` the status of the same
    export with them applied (the spec unchanged): what one click gives; ``status`` stays
    the export's own."""

    unit_id: str
    zoo: str
    model: str
    spec: str
    status: str
    options: Mapping[str, Any] = field(default_factory=dict)
    stages: Mapping[str, str] = field(default_factory=dict)
    failed_stage: str | None = None
    failure_class: str | None = None
    error: str | None = None
    verdict: str | None = None
    baseline: str | None = None
    baseline_error: str | None = None
    versus: str | None = None
    seconds: Mapping[str, float] = field(default_factory=dict)
    onnx_bytes: int | None = None
    speedup: float | None = None
    fixed_by: tuple[str, ...] = ()
    fixed_status: str | None = None
    versions: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    host: str = ""
    pid: int = 0
    started: float = 0.0
    finished: float = 0.0

    @property
    def ok(self) -> bool:
        """Exported, and not found wrong."""
        return self.status in ("passed", "not_verified", "exported")

    @property
    def exported(self) -> bool:
        """An ONNX model came out, right or wrong."""
        return self.status in ("passed", "not_verified", "exported", "verify_failed")

    @property
    def failed(self) -> bool:
        return self.status in FAILED

    @property
    def fixed(self) -> bool:
        """Failed, and passes with the model patches its session offered."""
        return self.failed and self.fixed_status == "passed"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what the sweep writes, one line per record)."""
        data = asdict(self)
        for name in ("options", "stages", "seconds", "versions"):
            data[name] = dict(data[name])
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnitRecord:
        """The record a :meth:`to_dict` gave (fields added since are left at their defaults)."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        if "fixed_by" in known:
            known["fixed_by"] = tuple(known["fixed_by"])
        return cls(**known)

    def outcome(self) -> dict[str, Any]:
        """What a record says about the model, without timings nor where it ran: two runs of
        the same unit on different engines or machines give the same outcome. The verdict's
        sentence is left out too: it names the sizes compared, and how many of the extra sizes
        run is decided by the time the others took (verify's budget), which a busy machine changes."""
        data = self.to_dict()
        for name in ("seconds", "host", "pid", "started", "finished", "speedup", "verdict"):
            data.pop(name)
        return data


def status_counts(records: Iterable[UnitRecord]) -> dict[str, int]:
    """How many units ended in each status, best first."""
    counted = Counter(r.status for r in records)
    return {status: counted[status] for status in STATUSES if counted[status]}


def zoo_counts(records: Sequence[UnitRecord]) -> str:
    """``3 of 10 pass, 7 export``: verified as passed, and exported at all (right or wrong)."""
    passed = sum(r.status == "passed" for r in records)
    return f"{passed} of {len(records)} pass, {sum(r.exported for r in records)} export"
