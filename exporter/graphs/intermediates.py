"""Per-node numeric differences: every ONNX node's output against the FX node it came from.

:func:`compare_intermediates` runs the decomposed program (what was translated) in a
``torch.fx.Interpreter`` and the optimized ONNX model (what the user saves) in onnxruntime,
with node outputs exposed as graph outputs, on one set of inputs (a verify case), and pairs
each ONNX node output with the FX value of the same name (the torch exporter names the value
an FX node becomes after the node; a graph output pairs with the program's user output at its
position). Each pair is judged by verify's rule (:func:`exporter.verify.tolerance.compare`:
``atol`` scaled to the value's magnitude). ONNX nodes whose outputs have no FX counterpart
(the inner steps of one FX node's translation, values an optimizer fusion created) are listed
as ``not compared``, with the reason.

Memory: values stream in chunks. A first FX run measures every paired value and keeps them
while their total stays under ``max_bytes``; the ONNX model then runs once per chunk of nodes
whose outputs fit in ``max_bytes`` (with the FX run repeated per chunk, keeping that chunk's
values only, when the first run could not keep them all). Only the metrics stay: at most about
``2 * max_bytes`` of intermediate values are held at once (``peak_bytes`` says how much was).
"""

from __future__ import annotations

import functools
import math
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from .. import compat
from ..artifacts import ExportArtifacts, ExportGraphs, ExportInputs
from ..cases import dim_groups, make_case_inputs, plan_cases
from ..errors import Failure, first_line
from ..events import CancelToken, Cancelled
from ..model_state import preserved
from ..presentation import Presentable
from ..serialize import initializer_bytes, write_external_data
from ..verify.core import _clone_tensors, _expected_outputs
from ..verify.divergence import program_inputs
from ..verify.tolerance import compare
from ..verify.values import edge_value_inputs
from .onnx import onnx_node_name

if TYPE_CHECKING:
    import onnxruntime

    from ..ort_model import OrtModel
    from ..verify.results import CaseResult, VerifyResult
    from ..verify.tolerance import Tolerance

__all__ = ["IntermediateComparison", "IntermediateRow", "IntermediatesSource", "compare_intermediates"]


class IntermediatesSource(ExportArtifacts, ExportGraphs, Protocol):
    """What :func:`compare_intermediates` reads from an export (a :class:`~exporter.Session`):
    its artifacts, its graphs' node mapping, and the latest verify result (for a case name)."""

    @property
    def last_verify(self) -> VerifyResult | None: ...

METRICS = ("max_abs", "max_rel")
DEFAULT_MAX_BYTES = 256 << 20
_COLUMNS = ["onnx_node", "onnx_op", "onnx_value", "fx_nodes", "fx_value", "module", "source", "status",
            "max_abs", "max_rel", "atol_applied", "onnx_shape", "fx_shape", "dtype", "nonfinite_onnx",
            "nonfinite_fx", "reason"]


@dataclass(frozen=True)
class IntermediateRow:
    """One ONNX node of the optimized model, in topological order.

    ``status``: ``pass`` (its output matches its FX value within tolerance), ``fail`` (it
    does not), ``mismatch`` (another shape or dtype), ``not compared`` (``reason`` says why:
    no FX counterpart, no FX origin...). ``onnx_value`` / ``fx_value`` name the pair compared
    (for a node with several paired outputs, the worst). ``atol_applied`` is the absolute slack
    verify's rule allowed (``atol + scale * max|fx|``); ``nonfinite_*`` count NaN/Inf elements."""

    onnx_node: str
    onnx_op: str
    fx_nodes: tuple[str, ...]
    module: str | None
    source: str | None
    status: str
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
    """What :func:`compare_intermediates` returns.

    ``status``: ``passed`` (every compared value within tolerance and the program's outputs
    match eager PyTorch), ``failed`` (a node is bad: see :attr:`first_bad`; or the program
    already differs from eager: ``program_differs``; or nothing could run: ``error``), or
    ``cancelled`` (its ``CancelToken`` was set: no rows).
    ``rows``: one :class:`IntermediateRow` per ONNX node of the optimized model, in topological
    order. ``chunks``: onnxruntime runs made; ``fx_runs``: FX interpreter runs; ``peak_bytes``:
    the most intermediate-value bytes held at once (both sides)."""

    case: str
    status: str
    rows: tuple[IntermediateRow, ...] = ()
    error: str | None = None
    program_differs: str | None = None
    chunks: int = 0
    fx_runs: int = 0
    peak_bytes: int = 0
    seconds: float = 0.0
    failure: Failure | None = None

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


# -- running ------------------------------------------------------------------------------------


def compare_intermediates(
    session: IntermediatesSource,
    case: str | CaseResult | None = None,
    *,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    cancel: CancelToken | None = None,
) -> IntermediateComparison:
    """Compare every ONNX node's output with its FX node's value on one set of inputs.

    ``case``: None or ``"example"`` (the example inputs), a verify case name (of
    ``session.last_verify``) or a :class:`~exporter.verify.CaseResult` from
    ``session.verify().cases``: the inputs are rebuilt as verify builds them (the same values
    when verify ran with its default ``sizes``/``seed``/``max_size`` and no ``make_inputs``
    hook; else the same sizes with fresh values). ``args`` / ``kwargs``: explicit inputs,
    given like the model's forward (``case`` then only names them). ``tolerances``: as
    :func:`exporter.verify.verify` takes them. ``max_bytes``: the intermediate values held
    per side at once (see the module docstring). ``cancel``: checked before each run and
    between the FX interpreter's nodes and the onnxruntime chunks; a cancelled comparison has
    status ``cancelled`` and no rows.

    Never raises for a wrong model or a failing run (a result with ``error``); raises the
    stage's :class:`~exporter.ExportError` when the export itself failed, and ``ValueError``
    for a case name verify did not run."""
    start = time.perf_counter()
    program = session.stage_output("decompose")  # a failed stage raises its ExportError here
    model = session.stage_output("optimize")
    mapping = session.graphs.mapping
    name, case_args, case_kwargs = _case_inputs(session, case, args, kwargs)
    try:
        return _compare(session, name, case_args, case_kwargs, program, model, mapping, tolerances, max_bytes,
                        cancel or CancelToken(), start)
    except Cancelled:
        return IntermediateComparison(name, "cancelled", seconds=time.perf_counter() - start)


def _compare(session: IntermediatesSource, name: str, case_args: tuple, case_kwargs: dict, program: Any, model: Any,
             mapping: Any, tolerances: Any, max_bytes: int, cancel: CancelToken, start: float) -> IntermediateComparison:
    """compare_intermediates once the inputs are known; raises Cancelled when ``cancel`` is set."""
    cancel.check()

    def failed(message: str, exc: BaseException, *, fx_runs: int = 0, chunks: int = 0,
               program_differs: str | None = None) -> IntermediateComparison:
        failure = replace(Failure.from_exception(exc, "compare_intermediates"), message=message)
        return IntermediateComparison(name, "failed", error=message, seconds=time.perf_counter() - start,
                                      fx_runs=fx_runs, chunks=chunks, program_differs=program_differs, failure=failure)

    try:
        feeds = session.feeds(*case_args, **dict(case_kwargs))  # before eager: a forward may write into its inputs
    except Exception as exc:  # noqa: BLE001
        return failed(f"could not build the ONNX inputs: {first_line(exc)}", exc)
    try:
        expected = _eager_outputs(session, case_args, case_kwargs)
    except Exception as exc:  # noqa: BLE001
        return failed(f"eager PyTorch raised {first_line(exc)}", exc)
    nodes = _nodes(model)
    pairs = _pairs(nodes, model, program)
    wanted = {fx for node_pairs in pairs.values() for _, fx in node_pairs}

    inputs = program_inputs(program, session, case_args, case_kwargs)
    try:
        outputs, sizes, kept = _run_fx(program, inputs, wanted, max_bytes, cancel)
    except Exception as exc:  # noqa: BLE001
        return failed(f"the decomposed program cannot run at these inputs ({first_line(exc)}): torch.export "
                      "assumed something that only holds near the example", exc)
    program_differs = _program_vs_eager(name, model, outputs, expected, tolerances)
    del outputs, expected
    fx_runs = 1
    chunks = _chunks(nodes, pairs, sizes, max_bytes)
    peak = sum(_nbytes(v) for v in kept.values()) if kept is not None else 0
    runner = _OrtRunner(model, session.ort_model)
    try:
        rows, peak, fx_runs, error = _compare_chunks(name, chunks, pairs, mapping, program, inputs, kept, feeds,
                                                     runner, tolerances, peak, fx_runs, cancel)
    finally:
        runner.close()
    if error is not None:
        message, cause = error
        return failed(message, cause, fx_runs=fx_runs, chunks=runner.runs, program_differs=program_differs)
    all_rows = tuple(rows.get(n.name) or _not_compared(n, mapping, pairs) for n in nodes)
    bad = any(r.bad for r in all_rows) or program_differs is not None
    return IntermediateComparison(
        name, "failed" if bad else "passed", all_rows, None, program_differs, runner.runs, fx_runs, peak,
        time.perf_counter() - start,
    )


def _compare_chunks(name: str, chunks: Sequence[Sequence[_Node]], pairs: Mapping[str, list[tuple[str, str]]],
                    mapping: Any, program: Any, inputs: Sequence[Any], kept: dict[str, Any] | None,
                    feeds: Mapping[str, Any], runner: _OrtRunner, tolerances: Any, peak: int, fx_runs: int,
                    cancel: CancelToken) -> tuple[dict[str, IntermediateRow], int, int, tuple[str, BaseException] | None]:
    """Each chunk: its FX values (kept, or from one more FX run), one onnxruntime run, its rows."""
    rows: dict[str, IntermediateRow] = {}
    for chunk in chunks:
        cancel.check()
        if kept is not None:
            fx_values = kept
        else:
            needed = {fx for node in chunk for _, fx in pairs[node.name]}
            _, _, every = _run_fx(program, inputs, needed, None, cancel)
            fx_values = every or {}  # no budget: every wanted value
            fx_runs += 1
        value_names = [v for node in chunk for v, _ in pairs[node.name]]
        try:
            onnx_values = runner.run(value_names, feeds)
        except Exception as exc:  # noqa: BLE001
            message = f"onnxruntime could not run the model with its intermediate values: {first_line(exc)}"
            return rows, peak, fx_runs, (message, exc)
        held = sum(_nbytes(v) for v in onnx_values.values()) + sum(_nbytes(fx_values[fx]) for node in chunk
                                                                  for _, fx in pairs[node.name] if fx in fx_values)
        peak = max(peak, held)
        for node in chunk:
            rows[node.name] = _node_row(name, node, mapping, pairs[node.name], onnx_values, fx_values, tolerances)
        del onnx_values
        if kept is None:
            del fx_values
    return rows, peak, fx_runs, None


def _nodes(model: Any) -> list[Any]:
    return [_Node(onnx_node_name(node, i), node) for i, node in enumerate(model.graph)]


@dataclass(frozen=True)
class _Node:
    name: str
    node: Any


def _case_inputs(session: IntermediatesSource, case: str | CaseResult | None, args: Sequence[Any] | None,
                 kwargs: Mapping[str, Any] | None) -> tuple[str, tuple, dict]:
    if args is not None or kwargs is not None:
        return (case if isinstance(case, str) else "inputs"), tuple(args or ()), dict(kwargs or {})
    if case is None or case == "example" or (not isinstance(case, str) and case.name == "example"):
        return "example", tuple(session.inputs.args), dict(session.inputs.kwargs)
    if isinstance(case, str):
        verified = session.last_verify
        names = [c.name for c in verified.cases] if verified is not None else []
        if verified is None or case not in names:
            known = ", ".join(repr(n) for n in names) or "none: run session.verify() first"
            raise ValueError(f"no verify case {case!r}; cases are: example, {known}")
        case = verified.case(case)
    return case.name, *_rebuild(session, case)


def _rebuild(session: ExportArtifacts, case: CaseResult) -> tuple[tuple, dict]:
    """The inputs verify built for ``case`` (see :func:`compare_intermediates`)."""
    if case.edge is not None:
        args, kwargs = edge_value_inputs(session, case.edge)
        return tuple(args), dict(kwargs)
    program = session.stage_output("capture")
    groups = dim_groups(session, program, session.stage_output("optimize"))
    seed = 0
    try:
        for i, plan in enumerate(plan_cases(groups, 512, None), start=1):
            if plan.name == case.name and tuple(plan.sizes) == tuple(case.sizes):
                seed = i
                break
    except Exception:  # noqa: BLE001 - no plan: the same sizes with fresh values
        pass
    args, kwargs, _ = make_case_inputs(session, program, groups, dict(case.sizes), seed=seed)
    return tuple(args), dict(kwargs)


def _eager_outputs(session: ExportInputs, args: tuple, kwargs: Mapping[str, Any]) -> list[Any]:
    import torch

    eager_args, eager_kwargs = _clone_tensors(args), _clone_tensors(dict(kwargs))
    with preserved(session.model, what="when called by compare_intermediates"), torch.inference_mode():
        result = session.model(*eager_args, **eager_kwargs)
    return _expected_outputs(compat.tree_flatten_with_path(result))


def _nbytes(value: Any) -> int:
    nbytes = getattr(value, "nbytes", None)
    if nbytes is None and hasattr(value, "element_size"):
        return int(value.element_size() * value.numel())
    return int(nbytes or 0)


def _run_fx(program: Any, inputs: Sequence[Any], wanted: set[str], budget: int | None,
            cancel: CancelToken | None = None) -> tuple[list[Any], dict[str, int], dict[str, Any] | None]:
    """Run the program's graph once, freeing values after their last use (``cancel`` checked
    before each node). Returns its user
    outputs, the size of every wanted value, and the wanted values when they fit ``budget``
    (None when they do not; every wanted value when ``budget`` is None)."""
    import torch

    sizes: dict[str, int] = {}
    kept: dict[str, Any] = {}
    total = [0, True]

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: Any) -> Any:
            if cancel is not None:
                cancel.check()
            # Interpreter.run_node without its per-node context (fx_traceback's current-node
            # metadata, for tracing through an interpreter): a third of the interpreter's time.
            args, kwargs = self.fetch_args_kwargs_from_env(node)
            result = getattr(self, node.op)(node.target, args, kwargs)
            if node.name in wanted:
                size = _nbytes(result)
                sizes[node.name] = size
                if total[1]:
                    total[0] += size
                    if budget is not None and total[0] > budget:
                        total[1] = False
                        kept.clear()
                    else:
                        kept[node.name] = result
            return result

    with torch.no_grad():
        flat = Recorder(program.graph_module).run(*inputs)
    flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
    outputs = [v for v, spec in zip(flat, program.graph_signature.output_specs) if spec.kind.name == "USER_OUTPUT"]
    return outputs, sizes, (kept if total[1] else None)


def _program_vs_eager(case: str, model: Any, outputs: Sequence[Any], expected: Sequence[Any],
                      tolerances: Any) -> str | None:
    """Why the program's outputs differ from eager PyTorch's (verify's rule), or None."""
    import torch

    names = [v.name for v in model.graph.outputs]
    tensors = [o if isinstance(o, torch.Tensor) else torch.tensor(o) for o in outputs
               if isinstance(o, (torch.Tensor, bool, int, float))]
    for i, (got, want) in enumerate(zip(tensors, expected)):
        check = compare(case, names[i] if i < len(names) else str(i), got, want, tolerances)
        if not check.ok:
            return ("the decomposed program already differs from eager PyTorch (" + check.describe()
                    + "): torch.export baked in behaviour of the example; the ONNX model follows the program")
    return None


def _pairs(nodes: Sequence[_Node], model: Any, program: Any) -> dict[str, list[tuple[str, str]]]:
    """ONNX node name → its ``(ONNX value, FX node)`` pairs: an output named after an FX node,
    or a graph output paired with the program's user output at its position."""
    fx_names = {n.name for n in program.graph.nodes if n.op == "call_function"}
    user_outputs = [getattr(s.arg, "name", None) for s in program.graph_signature.output_specs
                    if s.kind.name == "USER_OUTPUT"]
    graph_outputs = [v.name for v in model.graph.outputs]
    by_output = dict(zip(graph_outputs, user_outputs)) if len(graph_outputs) == len(user_outputs) else {}
    pairs: dict[str, list[tuple[str, str]]] = {}
    for node in nodes:
        found: list[tuple[str, str]] = []
        for value in node.node.outputs:
            if not value.name or value.dtype is None:
                continue
            fx = value.name if value.name in fx_names else by_output.get(value.name)
            if fx is not None and fx in fx_names:
                found.append((value.name, fx))
        pairs[node.name] = found
    return pairs


def _chunks(nodes: Sequence[_Node], pairs: Mapping[str, list[tuple[str, str]]], sizes: Mapping[str, int],
            budget: int) -> list[list[_Node]]:
    """The nodes with pairs, in order, cut where their output bytes would pass ``budget``."""
    chunks: list[list[_Node]] = []
    current: list[_Node] = []
    total = 0
    for node in nodes:
        if not pairs.get(node.name):
            continue
        size = sum(sizes.get(fx, 0) for _, fx in pairs[node.name])
        if current and total + size > budget:
            chunks.append(current)
            current, total = [], 0
        current.append(node)
        total += size
    if current:
        chunks.append(current)
    return chunks


class _OrtRunner:
    """The model in onnxruntime (no graph optimization: every node computes its own output),
    run once per chunk with that chunk's values as extra graph outputs.

    The model is serialized once. Its weights stay in that protobuf when they are small
    (under :data:`_INLINE_WEIGHTS`; a copy of the session's :class:`~exporter.ort_model.OrtModel`
    proto, which verify and the benchmark build too, so it is serialized once per export); otherwise they are written once to a temporary directory
    and each chunk's model is a small graph file beside them that refers to them, so a chunk
    never copies the weights in memory. The session of a one-chunk run of a small model
    (weights under :data:`_CACHED_WEIGHTS`) is kept for the next call on the same model (one
    entry): another case costs no session build. :meth:`close` removes the directory."""

    def __init__(self, model: Any, ort_model: OrtModel) -> None:
        self._model = model
        self._ort_model = ort_model
        self._proto: Any = None
        self._directory: Any = None
        self._types: dict[str, Any] = {}
        self.runs = 0

    @functools.cached_property
    def weight_bytes(self) -> int:
        """The model's initializer bytes (summed once: every chunk asks)."""
        return initializer_bytes(self._model)

    def run(self, names: Sequence[str], feeds: Mapping[str, Any]) -> dict[str, Any]:
        wanted = list(dict.fromkeys(names))
        self.runs += 1
        key = (id(self._model), tuple(wanted))
        cached = _CACHE.get("entry")
        if cached is not None and cached[0]() is self._model and cached[1] == key:
            return self._read(cached[2], wanted, feeds)
        session = self._session(wanted)
        values = self._read(session, wanted, feeds)
        if self._directory is None and self.weight_bytes <= _CACHED_WEIGHTS:
            _CACHE["entry"] = (weakref.ref(self._model), key, session)
        return values

    def close(self) -> None:
        if self._directory is not None:
            self._directory.cleanup()
            self._directory = None

    def _base_proto(self) -> Any:
        import onnx_ir as ir

        self._types = {v.name: v.dtype for node in self._model.graph for v in node.outputs if v.name}
        if self.weight_bytes <= _INLINE_WEIGHTS:
            if self._ort_model.model is self._model and not self._ort_model.is_large:
                return self._ort_model.model_proto
            return ir.to_proto(self._model)
        import tempfile
        from pathlib import Path

        import onnx

        self._directory = tempfile.TemporaryDirectory(prefix="onnx-workbench-intermediates-")
        path = write_external_data(self._model, Path(self._directory.name) / "model.onnx")
        return onnx.load(str(path), load_external_data=False)  # the graph, weights by reference

    def _session(self, names: Sequence[str]) -> Any:
        import onnxruntime as ort

        if self._proto is None:
            self._proto = self._base_proto()
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.enable_cpu_mem_arena = False  # a chunk's values go back to the system, not to an arena
        options.intra_op_num_threads = 1  # no thread pool to build, nor threads spinning beside the FX side
        outputs = self._proto.graph.output
        count = len(outputs)
        present = {o.name for o in outputs}
        for name in names:
            if name not in present and self._types.get(name) is not None:
                added = outputs.add()
                added.name = name
                added.type.tensor_type.elem_type = int(self._types[name])
        try:
            data = self._proto.SerializeToString()
        finally:
            del outputs[count:]
        if self._directory is None:
            return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        import os

        path = os.path.join(self._directory.name, f"chunk_{self.runs}.onnx")
        with open(path, "wb") as f:
            f.write(data)
        try:
            return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        finally:
            os.remove(path)

    @staticmethod
    def _read(ort_session: onnxruntime.InferenceSession, names: Sequence[str], feeds: Mapping[str, Any]) -> dict[str, Any]:
        return dict(zip(names, ort_session.run(list(names), dict(feeds))))


_INLINE_WEIGHTS = 256 << 20
_CACHED_WEIGHTS = 64 << 20
_CACHE: dict[str, tuple[Any, tuple, Any]] = {}


# -- judging ------------------------------------------------------------------------------------


def _not_compared(node: _Node, mapping: Any, pairs: Mapping[str, list[tuple[str, str]]]) -> IntermediateRow:
    entry = _entry(mapping, node.name)
    fx_nodes = entry.fx_nodes if entry is not None else ()
    origin = entry.origin if entry is not None else "unmapped"
    if origin == "unmapped":
        reason = "no FX origin recorded"
    elif origin == "optimizer":
        reason = "created by the optimizer; its outputs have no FX counterpart"
    elif any(v.dtype is None for v in node.node.outputs):
        reason = "its output has no type in the ONNX model"
    else:
        reason = f"an inner step of the translation of {', '.join(fx_nodes)}: its outputs have no FX counterpart"
    return IntermediateRow(node.name, _op(node.node), fx_nodes, _module(entry, node), _source(entry, node),
                           "not compared", reason=reason)


def _entry(mapping: Any, name: str) -> Any:
    try:
        return mapping[name]
    except KeyError:
        return None


def _op(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def _module(entry: Any, node: _Node) -> str | None:
    return entry.module if entry is not None else None


def _source(entry: Any, node: _Node) -> str | None:
    return entry.source if entry is not None else None


def _node_row(case: str, node: _Node, mapping: Any, pairs: Iterable[tuple[str, str]], onnx_values: Mapping[str, Any],
              fx_values: Mapping[str, Any], tolerances: Any) -> IntermediateRow:
    entry = _entry(mapping, node.name)
    fx_nodes = entry.fx_nodes if entry is not None else ()
    rows = [_pair_row(case, node, fx_nodes, entry, value, fx, onnx_values.get(value), fx_values.get(fx), tolerances)
            for value, fx in pairs]
    rank = {"mismatch": 0, "fail": 1, "pass": 2, "not compared": 3}
    return min(rows, key=lambda r: (rank[r.status], -(r.max_abs or 0.0)))


def _pair_row(case: str, node: _Node, fx_nodes: tuple[str, ...], entry: Any, value: str, fx: str, got: Any,
              want: Any, tolerances: Any) -> IntermediateRow:
    import numpy as np
    import torch

    # The row's fields, gathered and built once: dataclasses.replace per step cost a fifth of
    # a warm call on a 2-layer BERT.
    fields: dict[str, Any] = {
        "onnx_node": node.name, "onnx_op": _op(node.node), "fx_nodes": fx_nodes or (fx,), "module": _module(entry, node),
        "source": _source(entry, node), "status": "not compared", "onnx_value": value, "fx_value": fx}
    if got is None or want is None:
        return IntermediateRow(**fields, reason="a value was not produced")
    if isinstance(want, (bool, int, float)) and not isinstance(want, torch.Tensor):
        want = torch.tensor(want).reshape(np.shape(got)) if np.size(got) == 1 else torch.tensor(want)
    if not isinstance(want, torch.Tensor):
        return IntermediateRow(**fields, reason=f"the FX value is a {type(want).__name__}, not a tensor")
    if isinstance(got, torch.Tensor):
        raw: Any = got
        raw_dtype = None
    else:
        raw = np.asarray(got)
        raw_dtype = raw.dtype
    fx_dtype = str(want.dtype).removeprefix("torch.")
    fields.update(onnx_shape=tuple(raw.shape), fx_shape=tuple(want.shape), dtype=fx_dtype)
    if (raw_dtype is not None and raw_dtype.kind not in "V" and not want.is_complex() and "float8" not in fx_dtype
            and fx_dtype != "bfloat16" and raw_dtype.name != fx_dtype):
        fields.update(status="mismatch", reason=f"dtype {raw_dtype.name} in ONNX, {fx_dtype} in FX",
                      nonfinite_onnx=_nonfinite(raw), nonfinite_fx=_nonfinite(want))
        return IntermediateRow(**fields)
    check = compare(case, value, got, want, tolerances)
    if check.status not in ("pass", "fail"):  # a shape mismatch, or no comparison
        fields.update(status="mismatch", reason=check.describe(), nonfinite_onnx=_nonfinite(raw),
                      nonfinite_fx=_nonfinite(want))
    else:
        fields.update(status=check.status, max_abs=check.max_abs, max_rel=check.max_rel, atol_applied=check.atol_applied,
                      reason=None if check.ok else check.elements_text() or None,
                      nonfinite_onnx=check.nonfinite_actual, nonfinite_fx=check.nonfinite_expected)
    return IntermediateRow(**fields)


def _nonfinite(value: Any) -> int:
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        if not (value.is_floating_point() or value.is_complex()):
            return 0
        if value.dtype not in (torch.float32, torch.float64, torch.float16):
            return int((~torch.isfinite(value)).sum())
        value = value.detach().cpu().numpy()  # a view: numpy's check is cheaper than a torch op
    array = np.asarray(value)
    if array.dtype.kind not in "fc":  # bfloat16 (raw bits from onnxruntime) is not counted
        return 0
    finite = np.isfinite(array)
    return 0 if finite.all() else int((~finite).sum())
