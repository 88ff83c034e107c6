"""What :func:`~exporter.verify.verify` returns: cases, findings, the whole result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import Failure
from .contract import ContractReport
from .divergence import Divergence
from .groups import DimGroup
from .tolerance import DEFAULT_TOLERANCES, OutputCheck, Tolerance
from .values import EdgeValue


@dataclass(frozen=True)
class CaseResult:
    """One set of inputs: the sizes of the dim groups, and how each output compared.

    ``status``: ``pass``; ``fail`` (an output differs or has another shape); ``ort_error``
    (onnxruntime refused or crashed); ``eager_error`` (the module itself raised: the size is
    not supported by the model, not checked); ``error`` (inputs could not be built).

    ``edge``: for an edge-value case (a mask all zeros, ids at the vocabulary edge, at the
    example size), which input it sets to which value; None for a size case."""

    name: str
    sizes: tuple[tuple[str, int], ...]
    status: str
    outputs: tuple[OutputCheck, ...] = ()
    error: str | None = None
    outside_obtained: tuple[str, ...] = ()  # labels of groups whose size torch did not verify
    changed: tuple[str, ...] = ()  # labels of groups not at the example size
    seconds: float = 0.0
    edge: EdgeValue | None = None

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def is_example(self) -> bool:
        return self.name == "example"

    @property
    def is_edge_value(self) -> bool:
        return self.edge is not None

    @property
    def sizes_text(self) -> str:
        return ", ".join(f"{label}={size}" for label, size in self.sizes) or "(all static)"

    @property
    def max_abs(self) -> float | None:
        values = [o.max_abs for o in self.outputs if o.max_abs is not None]
        return max(values) if values else None

    @property
    def max_rel(self) -> float | None:
        values = [o.max_rel for o in self.outputs if o.max_rel is not None]
        return max(values) if values else None

    def describe(self) -> str:
        if self.status == "ort_error":
            return f"onnxruntime error: {self.error}"
        if self.status in ("eager_error", "error"):
            return str(self.error)
        bad = [o for o in self.outputs if not o.ok]
        return "; ".join(o.describe() for o in bad) if bad else "all outputs match"


@dataclass(frozen=True)
class Finding:
    """One plain-language conclusion: ``kind`` is ``wrong_at_example``, ``example_only``,
    ``wrong_at_size``, ``wrong_at_value`` (an edge-value case), ``static_in_onnx``,
    ``contract``, ``eager_error``, ``not_swept``; and, not a problem, ``derived_dim`` (a dim
    group sized from others, as the model's guards say: ``total = past_seq + seq``).

    ``fix``: what to do, when verify knows (``session.with_options(...)``); ``options``: the
    export options that fix, as pairs (see :attr:`VerifyResult.suggested_options`)."""

    kind: str
    message: str
    case: str | None = None
    sizes: tuple[tuple[str, int], ...] = ()
    cause: str | None = None
    fix: str | None = None
    options: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        return (self.message + (f"\n    likely cause: {self.cause}" if self.cause else "")
                + (f"\n    fix: {self.fix}" if self.fix else ""))


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of :func:`verify`: ``status`` is ``passed``, ``failed``, ``error``
    (nothing could be checked, e.g. the export failed: see ``error`` and ``failure``) or
    ``cancelled`` (stopped by its cancel token: ``cases`` holds those run before)."""

    status: str
    cases: tuple[CaseResult, ...] = ()
    groups: tuple[DimGroup, ...] = ()
    contract: ContractReport | None = None
    findings: tuple[Finding, ...] = ()
    divergence: Divergence | None = None
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: DEFAULT_TOLERANCES)
    seconds: float = 0.0
    error: str | None = None
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    def case(self, name: str) -> CaseResult:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def suggested_options(self) -> dict[str, Any]:
        """Export options the findings name as the fix (``{"fully_masked_rows": "zero"}``):
        ``session.with_options(**result.suggested_options)`` applies them."""
        return {name: value for finding in self.findings for name, value in finding.options}

    @property
    def failed_cases(self) -> tuple[CaseResult, ...]:
        return tuple(c for c in self.cases if c.status in ("fail", "ort_error", "error"))

    def to_frame(self) -> Any:
        """One row per case and output."""
        import pandas as pd

        rows = []
        for c in self.cases:
            base = {"case": c.name, "sizes": c.sizes_text, "outside_obtained_range": ", ".join(c.outside_obtained)}
            if not c.outputs:
                rows.append({**base, "output": None, "status": c.status, "max_abs": None, "max_rel": None,
                             "mismatched": None, "shape": None, "tolerance": None, "detail": c.error})
                continue
            for o in c.outputs:
                rows.append({
                    **base, "output": o.output, "status": o.status if c.status != "ort_error" else c.status,
                    "max_abs": o.max_abs, "max_rel": o.max_rel, "mismatched": o.mismatched,
                    "shape": list(o.actual_shape or o.expected_shape or ()),
                    "tolerance": str(o.tolerance) if o.tolerance else None,
                    "detail": None if o.ok else o.describe(),
                })
        columns = ["case", "sizes", "output", "status", "max_abs", "max_rel", "mismatched", "shape",
                   "tolerance", "outside_obtained_range", "detail"]
        return pd.DataFrame(rows, columns=columns)

    def groups_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "dim": g.label, "axes": g.axes_text, "requested": g.requested, "example": g.example,
                    "requested_range": g.describe_range("requested"),
                    "obtained": "specialized" if g.specialized else f"{g.symbol} {g.describe_range()}",
                    "onnx": ", ".join(map(str, g.onnx_dims)), "sizes": list(g.sizes),
                    "derived": g.derived_text or "", "causes": "; ".join(g.causes),
                }
                for g in self.groups
            ],
            columns=["dim", "axes", "requested", "example", "requested_range", "obtained", "onnx", "sizes", "derived",
                     "causes"],
        )

    @property
    def verdict(self) -> str:
        """One line: the verdict and what it rests on (the first line of :meth:`summary`)."""
        return self.summary().splitlines()[0]

    def summary(self) -> str:
        if self.status == "error":
            return f"Verification could not run: {self.error}"
        if self.status == "cancelled":
            return f"Verification cancelled after {len(self.cases)} case(s), {self.seconds:.2f} s"
        n_edge = sum(1 for c in self.cases if c.is_edge_value)
        n_other = sum(1 for c in self.cases if not c.is_example) - n_edge
        head = "PASSED" if self.ok else "FAILED"
        edges = f", {n_edge} edge value(s)" if n_edge else ""
        lines = [
            f"Verification {head}: {len(self.cases)} case(s) ({n_other} at other sizes{edges}), "
            f"{len(self.groups)} dim group(s), {self.seconds:.2f} s"
        ]
        if self.ok and self.groups:
            checked: dict[str, set[int]] = {g.label: set() for g in self.groups}
            for case in self.cases:
                if case.ok:  # a size eager refused was not checked: not listed as correct
                    for label, size in case.sizes:
                        checked.setdefault(label, set()).add(size)
            swept = "; ".join(f"{g.label} in {{{', '.join(map(str, sorted(checked[g.label] or g.sizes)))}}}" for g in self.groups)
            lines.append(f"  - correct at every swept size: {swept}")
        checked_edges = [c.edge.name for c in self.cases if c.ok and c.edge is not None]
        if self.ok and checked_edges:
            lines.append(f"  - correct with edge values: {'; '.join(checked_edges)}")
        for finding in self.findings:
            lines.append("  - " + str(finding).replace("\n", "\n  "))
        if self.divergence is not None:
            lines.append("  " + self.divergence.summary().replace("\n", "\n  "))
        if self.contract is not None and not self.contract.ok:
            lines.append("  " + self.contract.summary().replace("\n", "\n  "))
        lines.append("  cases:")
        width = max([14] + [len(c.name) for c in self.cases])
        for c in self.cases:
            diff = f"max abs {c.max_abs:.3g}" if c.max_abs is not None else ""
            outside = f"  (outside obtained range: {', '.join(c.outside_obtained)})" if c.outside_obtained else ""
            lines.append(f"    {c.name:<{width}} {c.sizes_text:<28} {c.status:<12} {diff}{outside}".rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())

    def _repr_html_(self) -> str:
        from ..display import repr_html

        return repr_html(self)
