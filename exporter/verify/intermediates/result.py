"""What :func:`~exporter.graphs.compare_intermediates` returns: one row per ONNX node, and the comparison."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...errors import Failure, Status
from ...presentation import Presentable

__all__ = ["METRICS", "InsideFinding", "IntermediateComparison", "IntermediateRow"]

METRICS = ("max_abs", "max_rel")
_COLUMNS = ["onnx_node", "onnx_op", "onnx_value", "fx_nodes", "fx_value", "module", "source", "status",
            "max_abs", "max_rel", "atol_applied", "onnx_shape", "fx_shape", "dtype", "nonfinite_onnx",
            "nonfinite_fx", "reason"]


@dataclass(frozen=True)
class InsideFinding:
    """What the search inside the first bad node's subgraph found. ``inner``: its nodes
    without an FX value (topological order); ``bad_on_fx_inputs``: the bad node is still wrong
    when its subgraph runs on FX values (``max_abs`` / ``max_rel`` / ``atol_applied``: its
    error there, against FX node ``fx_node``); ``culprit``: the node named, ``onnx_value`` its
    output that matched nothing (None: see ``reason``)."""

    bad_node: str
    inner: tuple[str, ...]
    bad_on_fx_inputs: bool
    culprit: str | None
    reason: str
    fx_node: str | None = None
    onnx_value: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    atol_applied: float | None = None


@dataclass(frozen=True)
class IntermediateRow:
    """One ONNX node of the optimized model, in topological order.

    ``status``: ``pass`` (its output matches its FX value within tolerance), ``fail`` (it
    does not), ``mismatch`` (another shape or dtype), ``not compared`` (``reason`` says why:
    no FX counterpart, no FX origin...). ``onnx_value`` / ``fx_value`` name the pair compared
    (for a node with several paired outputs, the worst). ``atol_applied`` is the absolute slack
    verify's rule allowed (``atol`` plus ``scale`` times the element's channel scale, see
    :mod:`exporter.verify.channels`); ``nonfinite_*`` count NaN/Inf elements."""

    onnx_node: str
    onnx_op: str
    fx_nodes: tuple[str, ...]
    module: str | None
    source: str | None
    status: Status
    onnx_value: str | None = None
    fx_value: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    atol_applied: float | None = None
    onnx_shape: tuple[int, ...] | None = None
    fx_shape: tuple[int, ...] | None = None
    dtype: str | None = None
    nonfinite_onnx: int = 0
    nonfinite_fx: int = 0
    reason: str | None = None

    @property
    def bad(self) -> bool:
        """Its error exceeds the tolerance, or its shape / dtype differs."""
        return self.status in ("fail", "mismatch")

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _COLUMNS}
        out["fx_nodes"] = ", ".join(self.fx_nodes)
        return out

    def describe(self) -> str:
        where = f" in {self.module}" if self.module else ""
        head = f"ONNX {self.onnx_op} {self.onnx_node!r}{where}"
        if self.status == "not compared":
            return f"{head}: not compared ({self.reason})"
        pair = f" (value {self.onnx_value!r} vs FX {self.fx_value!r})"
        if self.status == "mismatch":
            return f"{head}{pair}: {self.reason}"
        detail = f"max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}"
        if self.atol_applied is not None:
            detail += f", allowed abs {self.atol_applied:.3g}"
        return f"{head}{pair}: {self.status}, {detail}" + (f"; {self.reason}" if self.reason else "")


@dataclass(frozen=True, repr=False)
class IntermediateComparison(Presentable):
    """What :func:`~exporter.graphs.compare_intermediates` returns.

    ``status``: ``passed`` (every compared value within tolerance and the program's outputs
    match eager PyTorch), ``failed`` (a node is bad: see :attr:`first_bad`; or the program
    already differs from eager: ``program_differs``; or nothing could run: ``error``), or
    ``cancelled`` (its ``CancelToken`` was set: no rows).
    ``rows``: one :class:`IntermediateRow` per ONNX node of the optimized model, in topological
    order. ``chunks``: onnxruntime runs made; ``fx_runs``: FX interpreter runs; ``peak_bytes``:
    the most intermediate-value bytes held at once (both sides). ``eager_from``: where the
    eager outputs the program's were compared with came from: ``"this call"`` (eager PyTorch
    ran on the case's inputs) or ``"verify"`` (the outputs :func:`~exporter.verify.verify`
    computed on the same inputs, the module unchanged since); None when none were compared.
    ``error_at``: what could not run when there is an ``error``: ``"inputs"`` (the ONNX inputs
    could not be built), ``"eager"`` (eager PyTorch raised), ``"program"`` (the decomposed
    program cannot run at these inputs) or ``"onnxruntime"``. ``inside``: what the search
    inside the first bad compared node's translation found (:mod:`.inside`): when it names a
    node without an FX value of its own (the Sigmoid of a SiLU), that node's row is ``fail``
    with the reason, and it is :attr:`first_bad`."""

    case: str
    status: Status
    rows: tuple[IntermediateRow, ...] = ()
    error: str | None = None
    program_differs: str | None = None
    chunks: int = 0
    fx_runs: int = 0
    peak_bytes: int = 0
    seconds: float = 0.0
    failure: Failure | None = None
    eager_from: str | None = None
    error_at: str | None = None
    inside: InsideFinding | None = None

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    @property
    def first_bad(self) -> IntermediateRow | None:
        """The first ONNX node (topological order) whose output exceeds verify's tolerance
        or has another shape or dtype than its FX value; None when there is none."""
        return next((row for row in self.rows if row.bad), None)

    @property
    def compared(self) -> int:
        return sum(row.status != "not compared" for row in self.rows)

    def row(self, onnx_node: str) -> IntermediateRow:
        for row in self.rows:
            if row.onnx_node == onnx_node:
                return row
        raise KeyError(f"no ONNX node {onnx_node!r} in this comparison")

    def values(self, metric: str = "max_abs") -> dict[str, float]:
        """ONNX node name → ``metric`` (``max_abs`` or ``max_rel``) for every compared node:
        what a graph overlay paints (``overlay=result.values()``). Every number is finite, so a
        colour scale can divide by the largest: a shape or dtype mismatch, and an infinite
        error (NaN on one side only), take the largest finite value found (1.0 when there is
        none); :meth:`to_frame` keeps the true numbers."""
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; metrics are {', '.join(METRICS)}")
        raw: dict[str, float | None] = {}
        for row in self.rows:
            if row.status == "mismatch":
                raw[row.onnx_node] = None
            elif row.status in ("pass", "fail") and getattr(row, metric) is not None:
                value = float(getattr(row, metric))
                raw[row.onnx_node] = value if math.isfinite(value) else None
        worst = max((v for v in raw.values() if v is not None), default=0.0) or 1.0
        return {name: worst if value is None else value for name, value in raw.items()}

    def fx_values(self, metric: str = "max_abs") -> dict[str, float]:
        """FX node name → the largest ``metric`` of the ONNX nodes compared against it."""
        by_node = self.values(metric)
        out: dict[str, float] = {}
        for row in self.rows:
            if row.onnx_node in by_node and row.fx_value:
                out[row.fx_value] = max(out.get(row.fx_value, 0.0), by_node[row.onnx_node])
        return out

    def to_frame(self) -> Any:
        """One row per ONNX node: onnx_node, onnx_op, onnx_value, fx_nodes, fx_value, module,
        source, status, max_abs, max_rel, atol_applied, onnx_shape, fx_shape, dtype,
        nonfinite_onnx, nonfinite_fx, reason."""
        import pandas as pd

        return pd.DataFrame([row.to_dict() for row in self.rows], columns=_COLUMNS)

    @property
    def verdict(self) -> str:
        if self.status == "cancelled":
            return f"cancelled ({self.case})"
        if self.error:
            return f"not compared ({self.case}): {self.error}"
        counts = f"{self.compared} of {len(self.rows)} ONNX nodes compared"
        bad = self.first_bad
        if bad is not None:
            text = f"first bad node ({self.case}): {bad.onnx_node} ({bad.onnx_op})"
            if bad.module:
                text += f" in {bad.module}"
            if bad.status == "fail":
                text += f", max abs {bad.max_abs:.3g} > allowed {bad.atol_applied:.3g}"
            return f"{text}; {counts}"
        if self.program_differs:
            return (f"every compared node matches its FX value, but the program differs from eager PyTorch "
                    f"({self.case}); {counts}")
        return f"every compared node matches its FX value ({self.case}); {counts}"
