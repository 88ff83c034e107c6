"""What :func:`~exporter.verify.verify` returns: cases, findings, the whole result."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..cases import DimGroup
from ..errors import Failure, Status
from ..presentation import Presentable
from .case_runs import CaseRuns
from .contract import ContractReport
from .divergence import Divergence
from .tolerance import DEFAULT_TOLERANCES, OutputCheck, Tolerance
from .values import EdgeValue


_FAILING = ("training_mode", "wrong_at_example", "wrong_at_size", "wrong_at_value", "contract", "static_in_onnx", "example_only")


def _cut(text: str, limit: int = 140) -> str:
    """The first line of ``text``, at most ``limit`` characters: a longer one ends at its last
    clause (``; ``, ``, ``, `` (``) that fits, never inside a number or a name, then ``…``."""
    line = text.splitlines()[0] if text else ""
    if len(line) <= limit:
        return line
    head = line[: limit - 2]
    end = max(head.rfind(separator) for separator in ("; ", ", ", " ("))
    if end < limit // 2:  # no clause ends late enough: the last whole word
        end = head.rfind(" ")
    if end < limit // 2:  # one long word (a path)
        end = len(head)
    return line[:end].rstrip(" ,;:(") + " …"


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
    status: Status
    outputs: tuple[OutputCheck, ...] = ()
    error: str | None = None
    outside_obtained: tuple[str, ...] = ()  # labels of groups whose size torch did not verify
    changed: tuple[str, ...] = ()  # labels of groups not at the example size
    seconds: float = 0.0
    edge: EdgeValue | None = None
    state_changes: tuple[str, ...] = ()  # what the eager run changed on the module (put back)

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def compared(self) -> bool:
        """Both engines ran and their outputs were compared (passing or not)."""
        return self.status in ("pass", "fail", "ort_error")

    @property
    def is_example(self) -> bool:
        return self.name == "example"

    @property
    def is_edge_value(self) -> bool:
        return self.edge is not None

    @property
    def sizes_text(self) -> str:
        return ", ".join(f"{label}={size}" for label, size in self.sizes) or "all static"

    @property
    def max_abs(self) -> float | None:
        values = [o.max_abs for o in self.outputs if o.max_abs is not None]
        return max(values) if values else None

    @property
    def max_rel(self) -> float | None:
        values = [o.max_rel for o in self.outputs if o.max_rel is not None]
        return max(values) if values else None

    @property
    def error_key(self) -> tuple[str, str] | None:
        """The kind of a case's error and its text with every number masked: onnxruntime's same
        Reshape error at height 63 and 65 has one key (a shape in it differs). None for a case
        without an error (one that ran and compared, right or wrong)."""
        if self.status not in ("ort_error", "eager_error", "error") or not self.error:
            return None
        return str(self.status), re.sub(r"\d+", "#", self.error)

    def describe(self) -> str:
        if self.status == "ort_error":
            return f"onnxruntime error: {self.error}"
        if self.status in ("eager_error", "error"):
            return str(self.error)
        bad = [o for o in self.outputs if not o.ok]
        return "; ".join(o.describe() for o in bad) if bad else "all outputs match"


@dataclass(frozen=True)
class Finding:
    """One plain-language conclusion: ``kind`` is ``training_mode`` (dropout or batch norm
    left in training mode: the verdict names it first and the result fails), ``wrong_at_example``, ``example_only``,
    ``wrong_at_size``, ``wrong_at_value`` (an edge-value case), ``static_in_onnx``,
    ``contract``, ``eager_error``, ``not_swept``, ``not_varied`` (``sizes=`` left a group out: said, not a failure), ``not_verified`` (a dim group never compared
    at another size: eager PyTorch raised at every other size, or none was tried; the result is
    ``not_verified``, not ``passed``); and, not a problem: ``derived_dim`` (a dim group sized
    from others, as the model's guards say: ``total = past_seq + seq``), ``auto_static`` (AUTO
    let torch decide and torch made the dim static: not swept), ``model_changes_itself`` (an
    eager run changed the module's own state; verify put it back), ``unified_dims`` (axes torch found equal carry one of
    the names asked for: which one), ``tolerance`` (elements
    within the channel-scaled tolerance only (:mod:`exporter.verify.channels`): which, and why they pass); ``rounding`` (outputs
    beyond the tolerance that are as close to the model run in float64 as eager float32 is:
    rounding the model amplifies, so they pass); ``vacuous`` (the outputs in
    ``outputs`` have every value within atol of 0: at an absolute tolerance a model returning
    zeros would pass them, so they are not verified and the result is ``not_verified``); ``random`` (eager PyTorch gives other outputs at each run with the same
    inputs: the model draws random numbers, nothing compared says anything, the result is
    ``not_verified``).

    ``fix``: what to do, when verify knows (``session.with_options(...)``); ``options``: the
    export options that fix, as pairs (see :attr:`VerifyResult.suggested_options`)."""

    kind: str
    message: str
    case: str | None = None
    sizes: tuple[tuple[str, int], ...] = ()
    cause: str | None = None
    fix: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    outputs: tuple[str, ...] = ()  # the outputs it is about (a ``vacuous`` finding: those not verified)

    @property
    def fails(self) -> bool:
        """A kind that fails the result (the verdict names the first of them)."""
        return self.kind in _FAILING

    def __str__(self) -> str:
        return (self.message + (f"\n    likely cause: {self.cause}" if self.cause else "")
                + (f"\n    fix: {self.fix}" if self.fix else ""))


@dataclass(frozen=True, repr=False)
class VerifyResult(Presentable):
    """The outcome of :func:`verify`: ``status`` is ``passed`` (the ONNX model matched eager
    PyTorch at the example and at another size of every dim group swept), ``failed``,
    ``not_verified`` (nothing was wrong, but some dim group was never compared at another size:
    eager PyTorch raised there, or no size was tried; see the ``not_verified`` findings),
    ``error`` (nothing could be checked, e.g. the export failed: see ``error`` and ``failure``)
    or ``cancelled`` (stopped by its cancel token: ``cases`` holds those run before).
    ``case_runs``: the inputs the cases ran on and eager PyTorch's outputs there, the failing
    cases first, within :data:`~exporter.verify.case_runs.MAX_KEPT_BYTES` (what
    :func:`~exporter.graphs.compare_intermediates` reuses for a case verify ran)."""

    status: Status
    cases: tuple[CaseResult, ...] = ()
    groups: tuple[DimGroup, ...] = ()
    contract: ContractReport | None = None
    findings: tuple[Finding, ...] = ()
    divergence: Divergence | None = None
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: DEFAULT_TOLERANCES)
    seconds: float = 0.0
    error: str | None = None
    failure: Failure | None = None
    case_runs: CaseRuns | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    def case(self, name: str) -> CaseResult:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def unverified_outputs(self) -> tuple[str, ...]:
        """The outputs verify compared but cannot call verified (every value within atol of 0:
        a ``vacuous`` finding names them); empty when every output compared was judged."""
        return tuple(name for f in self.findings if f.kind == "vacuous" for name in f.outputs)

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

        rows: list[dict[str, Any]] = []
        for c in self.cases:
            base = {"case": c.name, "sizes": c.sizes_text, "outside_obtained_range": ", ".join(c.outside_obtained)}
            if not c.outputs:
                rows.append({**base, "output": None, "status": c.status, "max_abs": None, "max_rel": None,
                             "mismatched": None, "shape": None, "tolerance": None, "atol_applied": None,
                             "detail": c.error})
                continue
            for o in c.outputs:
                rows.append({
                    **base, "output": o.output, "status": o.status if c.status != "ort_error" else c.status,
                    "max_abs": o.max_abs, "max_rel": o.max_rel, "mismatched": o.mismatched,
                    "shape": list(o.actual_shape or o.expected_shape or ()),
                    "tolerance": str(o.tolerance) if o.tolerance else None,
                    "atol_applied": o.atol_applied,
                    "detail": None if o.ok else o.describe(),
                })
        columns = ["case", "sizes", "output", "status", "max_abs", "max_rel", "mismatched", "shape",
                   "tolerance", "atol_applied", "outside_obtained_range", "detail"]
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
                    "guard_sizes": "; ".join(f"{size} ({kind}: {text})" for kind, size, text in g.guard_sizes),
                }
                for g in self.groups
            ],
            columns=["dim", "axes", "requested", "example", "requested_range", "obtained", "onnx", "sizes", "derived",
                     "causes", "guard_sizes"],
        )

    def compared_sizes(self) -> dict[str, tuple[int, ...]]:
        """Per dim group, the sizes at which both engines ran and matched (the example's too)."""
        checked: dict[str, set[int]] = {g.label: set() for g in self.groups}
        for case in self.cases:
            if case.ok and not case.is_edge_value:
                for label, size in case.sizes:
                    checked.setdefault(label, set()).add(size)
        return {label: tuple(sorted(sizes)) for label, sizes in checked.items()}

    @property
    def verdict(self) -> str:
        """One line: the verdict and only what it rests on, what was actually compared (the
        first line of :meth:`summary`, whose text comes from
        :func:`exporter.display.sections.verify_section`)."""
        if self.status == "error":
            return f"Verification could not run: {self.error}"
        if self.status == "cancelled":
            return f"Verification cancelled after {len(self.cases)} case(s), {self.seconds:.2f} s"
        sizes = [c for c in self.cases if not c.is_edge_value]
        example = next((c for c in sizes if c.is_example), None)
        at = f" ({example.sizes_text})" if example is not None and self.groups else ""
        others = [c for c in sizes if not c.is_example and c.compared]
        edges = [c for c in self.cases if c.is_edge_value and c.compared]
        edge_text = f" and {len(edges)} edge value(s)" if edges else ""
        if self.status == "failed":
            wrong = [c for c in self.cases if c.compared and not c.ok] + [c for c in self.cases if c.status == "error"]
            failing = [f for f in self.findings if f.kind in _FAILING]
            first = min(failing, key=lambda f: _FAILING.index(f.kind), default=None)
            compared = sum(1 for c in self.cases if c.compared)
            counted = f"{len(wrong)} of {compared} compared case(s) wrong or failing" if wrong else ""
            if first is not None and first.kind == "training_mode":  # the cause first, then what it broke
                return f"Verification FAILED: {first.message}; fix: {first.fix}" + (f" ({counted})" if counted else "")
            head = f"Verification FAILED: {counted}" if wrong else "Verification FAILED"
            return head + (f"; {_cut(first.message)}" if first is not None else "")
        vacuous = next((f for f in self.findings if f.kind in ("random", "vacuous")), None)
        if self.status == "not_verified" and vacuous is not None:
            return f"Verification NOT VERIFIED: {_cut(vacuous.message, 480)}"  # with the gap it saw
        if self.status == "not_verified":
            missing = [f for f in self.findings if f.kind == "not_verified"]
            what = (f"the example{at}" + (f" and {len(others)} other size(s)" if others else " only")
                    if example is not None and example.compared else "nothing")
            return (f"Verification NOT VERIFIED at other sizes: compared {what}{edge_text}; "
                    + "; ".join(_cut(f.message, 160) for f in missing[:2]))
        if not self.groups:
            return f"Verification PASSED at the example size (no dim requested dynamic){edge_text}"
        checked = self.compared_sizes()
        swept = "; ".join(f"{g.label} in {{{', '.join(map(str, checked.get(g.label, ())))}}}"
                          for g in self.groups if not g.auto_static)
        static = [g.axes_text for g in self.groups if g.auto_static]
        tail = f"; made static by AUTO, not swept: {', '.join(static)}" if static else ""
        unvaried = [f.message for f in self.findings if f.kind == "not_varied"]
        tail += f"; {'; '.join(unvaried)}" if unvaried else ""
        return (f"Verification PASSED: ONNX matches eager PyTorch at the example and {len(others)} other size(s)"
                f"{edge_text}: {swept or 'no dim swept'}{tail}")
